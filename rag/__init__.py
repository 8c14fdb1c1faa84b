"""Sieve: a self-reflective RAG agent built as a DSPy program with optimized prompts.

It retrieves (bm25s + FAISS, fused by Reciprocal Rank Fusion), grades what it found, then answers with
citations, or rewrites the query and retries, or refuses after ``max_rewrites`` rewrites.

The public API::

    import rag

    rag.build_index("~/docs")                      # or rag.build_index() for the built-in corpus
    agent = rag.open_agent()                       # the embedded defaults, configured as for `rag ask`
    answer = agent("What does the nonlocal statement do?")
    answer.text, answer.sources, answer.refused, answer.trace
    agent.retriever.search("nonlocal", k=4)        # retrieval alone

- :func:`load_settings` / :class:`Settings`: every knob, with CLI > ``SIEVE_*`` env > ``sieve.toml`` > defaults.
- :func:`build_index`, :class:`Retriever`: the index and hybrid retrieval.
- :func:`open_agent` -> :class:`Agent` -> :class:`Answer`: a configured :class:`Sieve` (the ``dspy.Module``).
- :func:`run_eval`: the evaluation harness; :func:`compile_program`: DSPy optimizers over the golden set.
- :class:`SieveError`: every error Sieve reports, with what to fix (``rag.errors`` has the kinds).

The packages behind it: ``rag.ingest``, ``rag.index``, ``rag.retrieval``, ``rag.agent``, ``rag.lm``,
``rag.eval``, ``rag.report``, ``rag.stats``, ``rag.usage``, ``rag.serve``, ``rag.distributed``, ``rag.cli``.
"""

from typing import Any

from rag.api import Agent, Answer, Source, build_index, compile_program, open_agent, run_eval
from rag.config import Settings, load_settings
from rag.errors import SieveError
from rag.version import __version__

_LAZY = {"Sieve": "rag.agent.module", "Retriever": "rag.retrieval.retriever"}  # these import DSPy / FAISS

__all__ = ["Agent", "Answer", "Retriever", "Settings", "Sieve", "SieveError", "Source", "__version__", "build_index",
           "compile_program", "load_settings", "open_agent", "run_eval"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
