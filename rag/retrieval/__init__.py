"""Retrieval over an index: ``bm25``, ``dense`` or ``hybrid`` fused by Reciprocal Rank Fusion (``retriever``).

Nothing is imported here, so importing one module stays cheap.
"""

__all__ = ["retriever"]
