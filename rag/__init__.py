"""Sieve: a self-reflective RAG agent built as a DSPy program with optimized prompts.

The public API is small; everything else lives in one-concept modules:

    from rag import load_settings
"""

from rag.config import Settings, load_settings
from rag.errors import SieveError

__version__ = "0.1.0"

__all__ = ["Settings", "SieveError", "__version__", "load_settings"]
