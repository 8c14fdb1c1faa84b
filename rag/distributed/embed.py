"""``rag index --ray``: embedding batches run on worker actors; bm25s and FAISS are built here, on the driver.

:func:`ray_embedder` returns the ``embedder`` that ``rag.index.build_index`` calls with the texts to embed. It
orders them longest first, as sentence-transformers does inside one ``encode`` call, and cuts that order into
shards of whole batches, so each worker pads its batches as a local build would; each :class:`EmbedWorker`
loads the model once and embeds one shard per call with the same ``rag.embeddings.embed``. The vectors come
back in shard order and are put in their rows, so the index files, and every search, match a local build.
A worker that dies has its shard embedded again by another (at most ``max_attempts`` times per shard).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rag.distributed.cluster import connect, plan_workers, say
from rag.embeddings import BATCH_SIZE
from rag.errors import ModelError

SHARD_BATCHES = 8  # batches of BATCH_SIZE texts per task: big enough to amortise a call, small enough to spread
MAX_ATTEMPTS = 3  # times one shard may lose its worker before the build stops
POLL_S = 1.0


class EmbedWorker:
    """Loads the embedding model once; ``embed(texts)`` -> normalised float32 vectors."""

    def __init__(self, model: str):
        from rag.embeddings import load_embedder

        self.model = model
        load_embedder(model)

    def ready(self) -> int:
        return os.getpid()

    def embed(self, texts: list[str]) -> np.ndarray:
        from rag.embeddings import embed

        return embed(texts, self.model)


def shards(texts: Sequence[str], size: int) -> list[list[int]]:
    """Row numbers, longest text first (ties in row order), cut into runs of ``size``."""
    order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))
    return [order[i:i + size] for i in range(0, len(order), size)]


def ray_embedder(address: str, model: str, *, workers: int | None = None, shard_batches: int = SHARD_BATCHES,
                 max_attempts: int = MAX_ATTEMPTS, show_progress: bool = True) -> Callable[[list[str]], np.ndarray]:
    """An ``embedder(texts) -> vectors`` for ``build_index`` that embeds on ``workers`` actors of the cluster."""

    def embedder(texts: list[str]) -> np.ndarray:
        import ray
        from ray.exceptions import RayActorError

        connect(address, quiet=not show_progress)
        parts = shards(texts, BATCH_SIZE * shard_batches)
        count = min(plan_workers(workers, cpus_per_worker=1.0), len(parts))
        if show_progress:
            say(f"ray: embedding {len(texts)} texts in {len(parts)} shards on {count} workers")
        remote = ray.remote(EmbedWorker).options(num_cpus=1, max_restarts=0)
        idle = [remote.remote(model) for _ in range(count)]
        ray.get([a.ready.remote() for a in idle])
        out: list[np.ndarray | None] = [None] * len(parts)
        queue, inflight, attempts, done = deque(range(len(parts))), {}, [0] * len(parts), 0
        try:
            for _ in range(len(parts) * max_attempts + 1):  # each pass takes one finished (or failed) shard
                while queue and idle:
                    actor, n = idle.pop(), queue.popleft()
                    inflight[actor.embed.remote([texts[i] for i in parts[n]])] = (actor, n)
                if not inflight:
                    break
                ready: list[Any] = []
                while not ready:
                    ready, _ = ray.wait(list(inflight), num_returns=1, timeout=POLL_S)
                actor, n = inflight.pop(ready[0])
                try:
                    out[n] = ray.get(ready[0])
                except RayActorError as exc:
                    attempts[n] += 1
                    if attempts[n] >= max_attempts:
                        raise ModelError(f"embedding shard {n} lost its Ray worker {attempts[n]} times "
                                         f"({str(exc).strip().splitlines()[0][:200]}); the index was not changed") from None
                    queue.appendleft(n)
                    idle.append(remote.remote(model))
                    continue
                idle.append(actor)
                done += 1
                if show_progress:
                    say(f"ray: embedded shard {done}/{len(parts)}")
        finally:
            for actor in idle + [a for a, _ in inflight.values()]:
                ray.kill(actor)
        if any(v is None for v in out):
            raise ModelError("embedding on Ray did not finish every shard; the index was not changed")
        dim = out[0].shape[1]
        vectors = np.zeros((len(texts), dim), dtype=np.float32)
        for rows, part in zip(parts, out):
            vectors[rows] = part
        return vectors

    return embedder
