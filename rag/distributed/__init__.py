"""Sieve on a Ray cluster: evaluation items and embedding batches fan out to worker actors.

- ``rag.distributed.cluster``: connect to (or start) a cluster; how many workers it holds.
- ``rag.distributed.eval``: ``rag eval --ray``, items on worker actors, results written by the driver alone.
- ``rag.distributed.limiter``: one rate limiter for every worker (a named actor), and the quota stop.
- ``rag.distributed.embed``: ``rag index --ray``, embedding batches on workers, the index assembled here.

Ray is an optional extra: ``pip install -e ".[ray]"``.
"""

__all__ = ["cluster", "embed", "eval", "limiter"]
