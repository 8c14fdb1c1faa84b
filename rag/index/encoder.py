"""Sentence embeddings through ONNX Runtime: the torch-free encoder for queries, and for indexing.

``rag search`` used to spend ~10 s importing torch and sentence-transformers to embed one short query.
This module embeds with ONNX Runtime and the ``tokenizers`` library only, over an ONNX export of the same
sentence-transformers model (transformer + pooling + L2 normalisation in one graph), made once per model and
checked by :mod:`rag.index.export`, and **recorded in the index manifest** (``embedding.encoder``: runtime, id,
model sha256), which the query side follows (see :func:`query_encoder`); a mismatch is refused with the command
that fixes it.

Texts are tokenized once, sorted by token length and embedded in batches of similar length (little
padding) on one session that uses every core this process may run on (``intra_op_num_threads``). An int8
encoder embeds one text per batch instead, on one single-threaded session per core side by side (see
:data:`INT8_BATCH_SIZE`).
"""

from __future__ import annotations

import functools
import json
import os
import queue
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from rag.config import EMBEDDING_RUNTIMES as RUNTIMES
from rag.errors import ConfigError, IndexMismatch, ModelError

BATCH_SIZE = 32
# Short texts are batched more densely: a batch holds at most this many tokens (padded). Smaller batches stay
# in cache: on 300 Polygraph chunks, 2,048 embedded 1.1x (fp32) / 1.3x (int8) faster than 8,192 (2 cores).
MAX_BATCH_TOKENS = 2048
# int8: one text per batch, on one single-threaded session per core side by side. Dynamic quantization scales
# a batch's activations together, so a text's vector depended on its batch-mates (lowest cosine 0.983 between
# two batchings of 600 Polygraph chunks); alone, a passage gets the vector its query-time encoding would. On all
# 2,594 Polygraph chunks (2 cores) it embedded 1.40x faster than batches of <= 32 texts / 2,048 tokens on one
# two-thread session (21.4 s against 29.9 s). fp32 stays batched on one session: on 1,300 chunks the variants
# measured 0.89x (side by side, batches of 2,048 tokens) to 1.08x (side by side, 512 tokens), within noise.
INT8_BATCH_SIZE = 1
ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "encoder.json"


def cores() -> int:
    """CPU cores this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class OnnxEncoder:
    """An exported encoder folder, loaded: ``encode(texts)`` -> L2-normalised float32 vectors."""

    def __init__(self, folder: str | Path, threads: int | None = None) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.folder = Path(folder)
        self.meta: dict[str, Any] = json.loads((self.folder / META_FILE).read_text(encoding="utf-8"))
        self.id: str = self.meta["id"]
        self.dim: int = int(self.meta["dim"])
        self.max_length: int = int(self.meta["max_seq_length"])
        self.tokenizer = Tokenizer.from_file(str(self.folder / TOKENIZER_FILE))
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.no_padding()  # batches are padded here, to their own longest text
        self.threads = threads or cores()
        self.side_by_side = self.meta.get("precision") == "int8"  # see INT8_BATCH_SIZE
        self.batch_size = INT8_BATCH_SIZE if self.side_by_side else BATCH_SIZE
        self.session = self._session(ort, self.threads)
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()  # single-threaded sessions, made when needed
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.output = self.session.get_outputs()[0].name

    def _session(self, ort: Any, threads: int) -> Any:
        """An ONNX Runtime session. Graph optimization takes ~0.2 s of every start, so the optimized graph is
        saved beside the export (``ort-<version>/``, for this onnxruntime version) the first time and loaded as it
        is after that; the export itself is the fallback. The saved graph keeps its weights in a file of their own
        (``model.onnx.data``), which ONNX Runtime maps into memory instead of parsing and copying them: ~0.2 s
        less CPU and ~70 MB less memory per start than a graph with the weights inside."""

        def options(level: Any) -> Any:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.graph_optimization_level = level
            opts.log_severity_level = 3  # errors only
            return opts

        providers = ["CPUExecutionProvider"]
        optimized = self.folder / f"ort-{ort.__version__}"
        if (optimized / ONNX_FILE).is_file():
            try:
                return ort.InferenceSession(str(optimized / ONNX_FILE),
                                            options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL), providers=providers)
            except Exception:  # noqa: BLE001 - unreadable or foreign: optimize the export again
                pass
        opts = options(ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED)
        tmp = self.folder / f".{optimized.name}.{os.getpid()}"
        if os.access(self.folder, os.W_OK):
            tmp.mkdir(exist_ok=True)
            opts.optimized_model_filepath = str(tmp / ONNX_FILE)
            opts.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                          f"{ONNX_FILE}.data")  # beside the graph, named relative to it
            opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        try:
            session = ort.InferenceSession(str(self.folder / ONNX_FILE), opts, providers=providers)
            if (tmp / ONNX_FILE).is_file():
                os.replace(tmp, optimized)  # whole, or not at all (another process may have saved it first)
                for old in self.folder.glob("model.ort-*.onnx"):  # the graph with weights inside, of earlier Sieves
                    old.unlink()
        except OSError:
            pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return session

    def __repr__(self) -> str:
        return f"OnnxEncoder({self.id!r}, dim={self.dim})"

    def encode(self, texts: Sequence[str], batch_size: int | None = None, max_batch_tokens: int = MAX_BATCH_TOKENS,
               progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Embed ``texts`` (tokenized once, longest first, each batch padded to its own longest text; int8:
        batches of one text on ``self.threads`` single-threaded sessions side by side)."""
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        # sentence-transformers strips each text before tokenizing; so must we, to give the same tokens
        encodings = self.tokenizer.encode_batch([str(t).strip() for t in texts])
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=n)
        plan = _plan(lengths, batch_size or self.batch_size, max_batch_tokens)
        feed = lambda rows: self._feed([encodings[i] for i in rows], int(lengths[rows[0]]))  # noqa: E731
        if len(plan) == 1 or self.threads == 1 or not self.side_by_side:
            for rows in plan:
                out[rows] = self.session.run([self.output], feed(rows))[0]
                if progress is not None:
                    progress(len(rows))
            return out
        with ThreadPoolExecutor(self.threads, thread_name_prefix="sieve-embed") as pool:
            # ONNX Runtime releases the GIL while it runs; results are collected here, in plan order
            for rows, vectors in zip(plan, pool.map(lambda rows: self._run_alone(feed(rows)), plan)):
                out[rows] = vectors
                if progress is not None:
                    progress(len(rows))
        return out

    def _run_alone(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        """Run one batch on an idle single-threaded session (at most ``self.threads`` of them are made, the
        first time they are needed, and kept for the encoder's next calls)."""
        try:
            session = self._idle.get_nowait()
        except queue.Empty:
            import onnxruntime as ort

            session = self._session(ort, 1)
        try:
            return session.run([self.output], feed)[0]
        finally:
            self._idle.put(session)

    def batches(self, texts: Sequence[str], batch_size: int | None = None,
                max_batch_tokens: int = MAX_BATCH_TOKENS) -> list[np.ndarray]:
        """The row numbers of each batch :meth:`encode` embeds ``texts`` in, in order. A run of whole batches
        from this plan, given to ``encode`` in plan order, is batched the same way again (rag.distributed.embed
        relies on it: each batch's vectors depend on which texts share its padding)."""
        if len(texts) == 0:
            return []
        encodings = self.tokenizer.encode_batch([str(t).strip() for t in texts])
        return _plan(np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts)),
                     batch_size or self.batch_size, max_batch_tokens)

    def _feed(self, encodings: list[Any], width: int) -> dict[str, np.ndarray]:
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for r, e in enumerate(encodings):
            m = len(e.ids)
            ids[r, :m] = e.ids
            mask[r, :m] = 1
            types[r, :m] = e.type_ids
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return {name: arrays[name] for name in self.inputs}


def _plan(lengths: np.ndarray, batch_size: int, max_batch_tokens: int) -> list[np.ndarray]:
    """Rows longest first (ties in row order), cut greedily into batches of at most ``batch_size`` texts and
    ``max_batch_tokens`` padded tokens."""
    order = np.argsort(-lengths, kind="stable")
    out, start = [], 0
    while start < len(order):
        size = max(1, min(batch_size, max_batch_tokens // max(int(lengths[order[start]]), 1)))
        out.append(order[start:start + size])
        start += size
    return out


@functools.lru_cache(maxsize=4)
def load_encoder(folder: str, threads: int | None = None) -> OnnxEncoder:
    return OnnxEncoder(folder, threads)


# ---------------------------------------------------------------------------------------------- build side


def index_encoder(model: str, runtime: str, check_texts: Sequence[str] = (),
                  say: Callable[[str], None] | None = None, precision: str = "fp32") -> tuple[Any, dict[str, Any]]:
    """(encoder, manifest record) for building an index with ``model`` on ``runtime`` at ``precision``.

    ``onnx``: the ONNX export (made now if needed; int8: quantized from it); when the model cannot be
    exported, a one-line note and the torch encoder. ``torch``: sentence-transformers (fp32 only). ``auto``
    (the setting's default): int8 on ``onnx``, with a one-line note and fp32 where the int8 encoder cannot be
    made or fails its check on this CPU; fp32 on ``torch``. The record goes into the index manifest as
    ``embedding.encoder``; the query side follows it (:func:`query_encoder`)."""
    from rag.index.embeddings import embed, resolve_model_path
    from rag.index.export import encoder_id, ensure_export, model_sha256

    _check_runtime(runtime)
    if precision == "auto":
        if runtime != "onnx":
            return index_encoder(model, runtime, check_texts, say, "fp32")
        try:
            return index_encoder(model, runtime, check_texts, say, "int8")
        except ModelError as exc:
            if say:
                say(f"Note: indexing with the fp32 encoder; the int8 one is not usable here: {exc}")
            return index_encoder(model, runtime, check_texts, say, "fp32")
    path = resolve_model_path(model)
    sha = model_sha256(path)
    if runtime == "onnx":
        try:
            folder = ensure_export(model, sha, check_texts[:64], say, precision)
            encoder = load_encoder(str(folder))
            record = {"runtime": "onnxruntime", "id": encoder.id, "precision": precision, "model_sha256": sha,
                      "dim": encoder.dim, "max_seq_length": encoder.max_length}
            return encoder, record
        except ModelError as exc:
            if precision != "fp32":
                raise
            if say:
                say(f"Note: embedding with sentence-transformers (torch) instead of ONNX Runtime: {exc}")
    elif precision != "fp32":
        raise ConfigError(f"embedding_precision={precision} needs embedding_runtime=onnx (torch embeds in fp32)")

    class _Torch:
        def encode(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
            vectors = embed(list(texts), model)
            if progress is not None:
                progress(len(texts))
            return vectors

    record = {"runtime": "sentence-transformers", "id": encoder_id(sha) if sha else None, "precision": "fp32",
              "model_sha256": sha}
    return _Torch(), record


def _check_runtime(runtime: str) -> None:
    if runtime not in RUNTIMES:
        raise ConfigError(f"embedding_runtime={runtime!r} is not allowed; use one of: {', '.join(RUNTIMES)}")


# ---------------------------------------------------------------------------------------------- query side


def _note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def query_encoder(manifest: dict[str, Any], runtime: str, rebuild: str, say: Callable[[str], None] = _note) -> Any:
    """The encoder whose query vectors match an index's, from its manifest (``embedding``).

    * ``runtime="onnx"`` (default): the ONNX export recorded as ``embedding.encoder.id`` from
      ``$SIEVE_HOME/encoders``, no torch involved. If it is not there (another machine, a cleared cache)
      it is exported again from the installed model, once, after checking that the model's files are
      the ones the index was built with (else IndexMismatch naming ``rebuild``).
    * An index built before the manifest recorded its encoder: its model is exported on the first query
      (one note on stderr) and the export is reused from then on.
    * ``runtime="torch"``: sentence-transformers, after the same model check.
    * An index whose encoder is of another precision than fp32 cannot be queried with torch: refused
      with the fix.
    """
    from rag.index.embeddings import model_label, resolve_model_path
    from rag.index.export import _usable, encoder_id, encoders_dir, ensure_export, model_sha256

    _check_runtime(runtime)
    embedding = manifest.get("embedding", {})
    model = embedding.get("model", "default")
    recorded = embedding.get("encoder") or {}
    built_sha = recorded.get("model_sha256")
    label = model_label(model)

    def same_model() -> str | None:
        if embedding.get("adapted") and not Path(model).is_dir():  # rag.index.adapt: nothing to export it from
            raise IndexMismatch(f"the index was built with an encoder adapted to its corpus, {model}, which is gone "
                                f"(a cleared SIEVE_HOME?), so its queries cannot be embedded. Rebuild it with: {rebuild}")
        sha = model_sha256(resolve_model_path(model))
        if built_sha and sha and sha != built_sha:
            raise IndexMismatch(
                f"the index was built with {label} files of sha256 {built_sha[:12]}, the installed ones have "
                f"{sha[:12]} (the model changed), so query vectors would not match it. Rebuild it with: {rebuild}")
        return sha

    if runtime == "torch":
        if recorded.get("precision", "fp32") != "fp32":
            raise IndexMismatch(f"the index was built with the {recorded['precision']} ONNX encoder, whose vectors "
                                f"differ from sentence-transformers'; query it with embedding_runtime=onnx (the default), "
                                f"or rebuild it for torch with: SIEVE_EMBEDDING_RUNTIME=torch {rebuild}")
        same_model()
        return _TorchQuery(model)
    precision = recorded.get("precision", "fp32")
    if recorded.get("id"):
        folder = encoders_dir() / recorded["id"]
        if _usable(folder):
            return load_encoder(str(folder))
        sha = same_model()
        if sha and recorded["id"] != encoder_id(sha, precision):  # an older export or quantization recipe
            raise IndexMismatch(
                f"the index was built with the ONNX encoder {recorded['id']}, which is not in {encoders_dir()}; this "
                f"version of Sieve makes {encoder_id(sha, precision)} instead, whose vectors would not match the "
                f"index's. Rebuild it with: {rebuild}")
        say(f"Note: the ONNX encoder of this index is not in {encoders_dir()}; exporting {label} again, once")
    else:  # an index from before the manifest recorded its encoder: the installed model's export
        sha = same_model()
        folder = encoders_dir() / encoder_id(sha) if sha else None
        if folder is not None and _usable(folder):
            return load_encoder(str(folder))
        say(f"Note: this index was built before Sieve recorded its query encoder; exporting {label} to ONNX once "
            f"(needs torch this one time; later queries load it from {encoders_dir()})")
    try:
        return load_encoder(str(ensure_export(model, sha, say=say, precision=precision)))
    except ModelError as exc:
        if precision != "fp32":
            raise
        say(f"Note: queries use sentence-transformers (torch): {exc}")
        return _TorchQuery(model)


class _TorchQuery:
    def __init__(self, model: str) -> None:
        self.model = model

    def encode(self, texts: Sequence[str], **_: Any) -> np.ndarray:
        from rag.index.embeddings import embed

        return embed(list(texts), self.model)
