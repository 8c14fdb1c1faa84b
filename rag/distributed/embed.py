"""``rag index --ray``: embedding batches run on worker actors; bm25s and FAISS are built here, on the driver.

:func:`ray_embedder` returns the ``embedder`` that ``rag.index.build.build_index`` hands the texts to embed, together
with the encoder a local build would use (``rag.index.encoder.index_encoder``: made, for ONNX, before any worker
starts) and its manifest record. Every worker embeds with exactly that encoder:

- **ONNX** (the default runtime): the export named in the record (same model files, checked by their sha256;
  same precision), loaded from ``$SIEVE_HOME/encoders`` where the driver made it; a worker on another machine
  makes the same export there once. The driver plans the batches as ``OnnxEncoder.encode`` would for the whole
  list (tokenized, longest first, each batch padded to its longest text) and cuts that plan into shards of
  whole batches; a shard given to ``encode`` in plan order is batched the same way again, so every vector is
  computed from the same padded batch as in a local build, and comes out bit for bit the same.
- **sentence-transformers** (``embedding_runtime=torch``, or an export that failed): texts ordered longest first
  by characters (as sentence-transformers orders one ``encode`` call) and cut into shards of whole batches.

The vectors come back in shard order and are put in their rows; the manifest records the same encoder as a
local build. A worker that dies has its shard embedded again by another (at most ``max_attempts`` times).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from rag.distributed.cluster import connect, plan_workers, say
from rag.errors import IndexMismatch, ModelError
from rag.index.embeddings import BATCH_SIZE

SHARD_BATCHES = 8  # batches per task: big enough to amortise a call, small enough to spread
MAX_ATTEMPTS = 3  # times one shard may lose its worker before the build stops
POLL_S = 1.0
ONNX = "onnxruntime"


class EmbedWorker:
    """Loads the index's encoder once; ``embed(texts)`` -> normalised float32 vectors.

    ``record`` is the manifest's ``embedding.encoder`` (rag.index.encoder.index_encoder); ``threads`` the ONNX
    Runtime threads (the worker's CPUs)."""

    def __init__(self, model: str, record: dict[str, Any] | None = None, threads: int | None = None):
        self.model, self.record, self.encoder = model, dict(record or {}), None
        if self.record.get("runtime") == ONNX:
            self.encoder = worker_encoder(model, self.record, threads)
        else:
            from rag.index.embeddings import load_embedder

            load_embedder(model)

    def ready(self) -> tuple[int, str | None]:
        return os.getpid(), getattr(self.encoder, "id", None)

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.encoder is not None:
            return self.encoder.encode(texts)
        from rag.index.embeddings import embed

        return embed(texts, self.model)


def worker_encoder(model: str, record: dict[str, Any], threads: int | None = None) -> Any:
    """The ONNX encoder ``record`` names, on this machine: from ``$SIEVE_HOME/encoders`` when it is there (the
    driver made it, or an earlier build), else exported here once, after checking that this machine's model
    files are the ones the driver's record was made from (IndexMismatch otherwise)."""
    from rag.index.embeddings import model_label, resolve_model_path
    from rag.index.encoder import load_encoder
    from rag.index.export import _usable, encoders_dir, ensure_export, model_sha256

    folder = encoders_dir() / str(record["id"])
    if not _usable(folder):
        sha = model_sha256(resolve_model_path(model))
        if sha != record.get("model_sha256"):
            raise IndexMismatch(f"this Ray node's {model_label(model)} files (sha256 {str(sha)[:12]}) are not the "
                                f"driver's ({str(record.get('model_sha256'))[:12]}); install the same model on every node")
        folder = ensure_export(model, sha, precision=record.get("precision", "fp32"))
    encoder = load_encoder(str(folder), threads)
    if encoder.id != record["id"]:
        raise ModelError(f"the Ray worker's encoder is {encoder.id}, the index's {record['id']}")
    return encoder


def shards(texts: Sequence[str], size: int) -> list[list[int]]:
    """Row numbers, longest text first (ties in row order), cut into runs of ``size`` (the torch runtime)."""
    order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))
    return [order[i:i + size] for i in range(0, len(order), size)]


def onnx_shards(encoder: Any, texts: Sequence[str], batches_per_shard: int) -> list[list[int]]:
    """``encoder.encode``'s own batch plan for ``texts``, cut into runs of whole batches: ``batches_per_shard``
    batches of fp32's size (an int8 encoder embeds one text per batch, so BATCH_SIZE of its batches count as one)."""
    plan = encoder.batches(texts)
    per = batches_per_shard * max(1, BATCH_SIZE // getattr(encoder, "batch_size", BATCH_SIZE))
    return [[int(i) for batch in plan[n:n + per] for i in batch] for n in range(0, len(plan), per)]


class RayEmbedder:
    """The ``embedder`` for ``build_index``: ``embedder(texts, encoder=..., record=...)`` embeds ``texts`` on
    ``workers`` actors of the cluster at ``address`` with the encoder ``record`` names (what a local build
    would use), and returns what ``encoder.encode(texts)`` would."""

    uses_index_encoder = True  # build_index passes its encoder and manifest record

    def __init__(self, address: str, model: str, *, workers: int | None = None, shard_batches: int = SHARD_BATCHES,
                 max_attempts: int = MAX_ATTEMPTS, show_progress: bool = True):
        self.address, self.model, self.workers = address, model, workers
        self.shard_batches, self.max_attempts, self.show_progress = shard_batches, max_attempts, show_progress
        self.pids: list[int] = []  # worker processes (tests)
        self.parts: list[list[int]] = []  # the last call's shards

    def __call__(self, texts: list[str], encoder: Any = None, record: dict[str, Any] | None = None) -> np.ndarray:
        import ray
        from ray.exceptions import RayActorError

        connect(self.address, quiet=not self.show_progress)
        record = dict(record or {"runtime": "sentence-transformers"})
        onnx = record.get("runtime") == ONNX
        parts = (onnx_shards(encoder, texts, self.shard_batches) if onnx
                 else shards(texts, BATCH_SIZE * self.shard_batches))
        self.parts = parts
        count = min(plan_workers(self.workers, cpus_per_worker=1.0), len(parts))
        if self.show_progress:
            say(f"ray: embedding {len(texts)} texts in {len(parts)} shards on {count} workers "
                f"({record.get('runtime')} {record.get('id') or ''})".rstrip())
        remote = ray.remote(EmbedWorker).options(num_cpus=1, max_restarts=0)
        spawn = lambda: remote.remote(self.model, record, 1)  # noqa: E731 - one ONNX thread per worker CPU
        idle = [spawn() for _ in range(count)]
        out: list[np.ndarray | None] = [None] * len(parts)
        inflight: dict[Any, tuple[Any, int]] = {}
        try:
            self.pids = [pid for pid, _ in _started(ray, [a.ready.remote() for a in idle])]
            queue, attempts, done = deque(range(len(parts))), [0] * len(parts), 0
            for _ in range(len(parts) * self.max_attempts + 1):  # each pass takes one finished (or failed) shard
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
                    if attempts[n] >= self.max_attempts:
                        raise ModelError(f"embedding shard {n} lost its Ray worker {attempts[n]} times "
                                         f"({str(exc).strip().splitlines()[0][:200]}); the index was not changed") from None
                    queue.appendleft(n)
                    idle.append(spawn())
                    continue
                idle.append(actor)
                done += 1
                if self.show_progress:
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


def _started(ray: Any, refs: list[Any]) -> list[Any]:
    """``ray.get(refs)`` of the workers' ``ready``; a worker that could not load the encoder raises its own
    one-line error (a Sieve error as it is), not Ray's wrapper."""
    from rag.errors import SieveError

    try:
        return ray.get(refs)
    except Exception as exc:  # noqa: BLE001
        cause = exc
        for _ in range(3):
            inner = getattr(cause, "cause", None)
            if not isinstance(inner, BaseException):
                break
            cause = inner
        if isinstance(cause, SieveError):
            raise cause from None
        first = str(cause).strip().splitlines()[0][:200] if str(cause).strip() else type(cause).__name__
        raise ModelError(f"a Ray worker could not load the encoder: {first}") from None


def ray_embedder(address: str, model: str, *, workers: int | None = None, shard_batches: int = SHARD_BATCHES,
                 max_attempts: int = MAX_ATTEMPTS, show_progress: bool = True) -> RayEmbedder:
    """An ``embedder`` for ``build_index`` that embeds on ``workers`` actors of the cluster (see RayEmbedder)."""
    return RayEmbedder(address, model, workers=workers, shard_batches=shard_batches, max_attempts=max_attempts,
                       show_progress=show_progress)
