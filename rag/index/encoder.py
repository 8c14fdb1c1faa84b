"""Sentence embeddings through ONNX Runtime: the torch-free encoder for queries, and for indexing.

``rag search`` used to spend ~10 s importing torch and sentence-transformers to embed one short query.
This module embeds with ONNX Runtime and the ``tokenizers`` library only, over an ONNX export of the same
sentence-transformers model (transformer + pooling + L2 normalisation in one graph):

* **made once per model**, at ``rag index`` time (or at the first query on an index built before this
  encoder existed), by ``torch.onnx.export`` (the TorchScript exporter, opset 17; torch and
  sentence-transformers are needed for that step only), and kept in ``$SIEVE_HOME/encoders/<id>/``
  (``model.onnx``, ``tokenizer.json``, ``encoder.json``). ``<id>`` is derived from a sha256 of the model
  folder's files, so a changed model never silently reuses an old export;
* **checked before it is kept**: its vectors for sample texts must have cosine >= :data:`MIN_COSINE` with
  sentence-transformers' own (the export is refused otherwise, and the torch encoder is used);
* **recorded in the index manifest** (``embedding.encoder``: runtime, id, model sha256), which the query
  side follows (see :func:`query_encoder`); a mismatch is refused with the command that fixes it.

Texts are tokenized once, sorted by token length and embedded in batches of similar length (little
padding) on one session that uses every core this process may run on (``intra_op_num_threads``). An int8
encoder embeds one text per batch instead, on one single-threaded session per core side by side (see
:data:`INT8_BATCH_SIZE`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import queue
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from rag.config import EMBEDDING_RUNTIMES as RUNTIMES
from rag.config import ENCODER_PRECISIONS as PRECISIONS
from rag.errors import ConfigError, IndexMismatch, ModelError

ENCODER_VERSION = 1  # the export recipe; part of the encoder id, bump when export() changes what it writes
MIN_COSINE = 0.9999  # an export whose vectors differ more than this from sentence-transformers' is not used
# The int8 quantization recipe; part of an int8 encoder's id (so an index is never queried with another
# recipe's vectors), bump when quantize() changes what it writes. 1: one scale per weight tensor (lowest cosine
# to fp32 0.78 on 300 Polygraph chunks); 2: one scale per output channel, 7-bit weights (0.977-0.980).
INT8_RECIPE = 2
INT8_OPTIONS = {"weight_type": "QInt8", "per_channel": True, "reduce_range": True}  # onnxruntime quantize_dynamic
MIN_INT8_COSINE = 0.95  # an int8 model whose vectors differ more than this from fp32's is not used
OPSET = 17
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
_HASHED_SUFFIXES = (".json", ".txt", ".safetensors", ".bin", ".model")  # weights, configs, vocabularies

SAMPLE_TEXTS = (  # checked at export time, besides the caller's own texts
    "how do I catch several exceptions in one except clause?",
    "What does the nonlocal statement do?",
    "The with statement is used to wrap the execution of a block with methods defined by a context manager.",
    "Docker Compose: the depends_on key controls the order in which services start.",
    "x",
    "Reimbursement of international travel requires the receipts within thirty (30) days of return.",
    "Ünïcödé, 中文, emoji 🙂 and numbers 3.14159 in one line",
    " ".join(["a long passage that is cut at the model's maximum sequence length"] * 60),
)


def cores() -> int:
    """CPU cores this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def encoders_dir() -> Path:
    from rag.paths import sieve_home

    return sieve_home() / "encoders"


def model_sha256(model_path: str | Path) -> str | None:
    """sha256 over a local model folder's weights, configs and vocabularies (relative names and bytes, in
    name order); None when ``model_path`` is not a local folder (a hub name). Remembered in
    ``encoders/model-hashes.json`` under the files' names, sizes and modification times, so the ~90 MB are
    read again only when a file changed."""
    root = Path(model_path)
    if not root.is_dir():
        return None
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in _HASHED_SUFFIXES
                   and not any(part.startswith(".") for part in p.relative_to(root).parts))
    stamp = hashlib.sha256(json.dumps([(p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                                       for p in files]).encode()).hexdigest()
    memo = encoders_dir() / "model-hashes.json"
    try:
        known = json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    entry = known.get(str(root.resolve())) if isinstance(known, dict) else None
    if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("sha256"), str):
        return entry["sha256"]
    sha = _hash_files(root, files)
    try:
        known = known if isinstance(known, dict) else {}
        known[str(root.resolve())] = {"stamp": stamp, "sha256": sha}
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_name(f".{memo.name}.{os.getpid()}")
        tmp.write_text(json.dumps(known, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, memo)
    except OSError:  # a read-only SIEVE_HOME: hash again next time
        pass
    return sha


def _hash_files(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for path in files:
        h.update(path.relative_to(root).as_posix().encode("utf-8") + b"\x00")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\x01")
    return h.hexdigest()


def encoder_id(sha: str, precision: str = "fp32") -> str:
    base = f"{sha[:16]}-{precision}-v{ENCODER_VERSION}"
    return f"{base}-q{INT8_RECIPE}" if precision == "int8" else base


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a * b).sum(axis=1)


# ---------------------------------------------------------------------------------------------- export


def export(model: str, dest: Path, sha: str, check_texts: Sequence[str] = (),
           say: Callable[[str], None] | None = None) -> Path:
    """Export sentence-transformers model ``model`` (a setting: ``default``, a folder) to ``dest``.

    The graph is the model's own modules (transformer, pooling, any dense layers) followed by L2
    normalisation, traced by ``torch.onnx.export(dynamo=False)`` with dynamic batch and sequence axes. It is
    kept only if its vectors match sentence-transformers' (cosine >= MIN_COSINE) on SAMPLE_TEXTS plus
    ``check_texts``; otherwise ModelError. Written to a temporary sibling and renamed into place."""
    from rag.index.embeddings import load_embedder, model_label, resolve_model_path

    started = time.perf_counter()
    import torch

    st = load_embedder(model)
    tokenizer = getattr(st, "tokenizer", None)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ModelError(f"{model_label(model)} has no fast (tokenizers) tokenizer; it cannot run without torch")
    prepare = getattr(st, "preprocess", None) or st.tokenize  # tokenize is deprecated (and says so) in v6
    features = prepare(["a first sample text", "a second, longer sample text to pad the first one"])
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in features]
    if "input_ids" not in names or "attention_mask" not in names:
        raise ModelError(f"{model_label(model)} takes inputs {sorted(features)}; only BERT-like encoders are exported")

    class Graph(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            vector = self.inner(dict(zip(names, inputs)))["sentence_embedding"]
            return torch.nn.functional.normalize(vector, p=2.0, dim=1)

    transformer = st[0].auto_model if hasattr(st[0], "auto_model") else None
    if transformer is not None and hasattr(transformer, "set_attn_implementation"):
        try:  # plain matmul attention: no SDPA-specific branches in the traced graph
            transformer.set_attn_implementation("eager")
        except Exception:  # noqa: BLE001 - keep whatever the model uses
            pass
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.export-", dir=dest.parent))
    try:
        import warnings

        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on constants; the result is checked below
            torch.onnx.export(
                Graph(st).eval(), tuple(features[n] for n in names), str(tmp / ONNX_FILE), dynamo=False,
                input_names=names, output_names=["sentence_embedding"], opset_version=OPSET,
                dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in names}, "sentence_embedding": {0: "batch"}},
                do_constant_folding=True,
            )
        backend.save(str(tmp / TOKENIZER_FILE))
        dim = int(st.get_sentence_embedding_dimension() if not hasattr(st, "get_embedding_dimension")
                  else st.get_embedding_dimension())
        meta = {
            "id": dest.name, "format": ENCODER_VERSION, "runtime": "onnxruntime", "precision": "fp32",
            "model": model, "label": model_label(model), "path": resolve_model_path(model), "model_sha256": sha,
            "dim": dim, "max_seq_length": int(st.max_seq_length), "inputs": names, "normalized": True,
            "opset": OPSET, "exported_with": {"torch": torch.__version__, "exporter": "torch.onnx.export(dynamo=False)"},
        }
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        texts = list(SAMPLE_TEXTS) + [t for t in check_texts if t.strip()]
        candidate = OnnxEncoder(tmp)
        ours = candidate.encode(texts)
        theirs = st.encode(texts, batch_size=BATCH_SIZE, convert_to_numpy=True, normalize_embeddings=True)
        worst = float(_cosines(ours, np.asarray(theirs, dtype=np.float32)).min())
        if worst < MIN_COSINE:
            raise ModelError(f"the ONNX export of {model_label(model)} differs from sentence-transformers "
                             f"(lowest cosine {worst:.6f} < {MIN_COSINE} on {len(texts)} texts)")
        del candidate
        meta.update(checked={"texts": len(texts), "min_cosine": round(worst, 7)}, onnx_sha256=_sha256_file(tmp / ONNX_FILE),
                    export_seconds=round(time.perf_counter() - started, 1))
        _publish(tmp, dest, meta)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if say:
        say(f"exported {model_label(model)} to ONNX in {time.perf_counter() - started:.1f}s "
            f"(lowest cosine to sentence-transformers {worst:.6f} on {len(texts)} texts): {dest}")
    return dest


def _usable(folder: Path) -> bool:
    return (folder / META_FILE).is_file() and (folder / ONNX_FILE).is_file() and (folder / TOKENIZER_FILE).is_file()


def _publish(tmp: Path, dest: Path, meta: dict) -> None:
    """Write ``meta`` into the finished folder ``tmp`` and rename it to ``dest`` in one step; when another
    process put the same encoder there first, keep theirs and drop ``tmp``."""
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    try:
        os.replace(tmp, dest)
    except OSError:
        if not (dest / META_FILE).is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def ensure_export(model: str, sha: str | None = None, check_texts: Sequence[str] = (),
                  say: Callable[[str], None] | None = None, precision: str = "fp32") -> Path:
    """The encoder folder for ``model`` (its files' sha256 ``sha``, computed when not given) at ``precision``,
    exported (and quantized, for int8) first if it is not in :func:`encoders_dir` yet. ModelError when the
    model cannot be exported."""
    from rag.index.embeddings import resolve_model_path

    if precision not in PRECISIONS:
        raise ConfigError(f"embedding_precision={precision!r} is not allowed; use one of: {', '.join(PRECISIONS)}")
    sha = sha or model_sha256(resolve_model_path(model))
    if sha is None:
        raise ModelError(f"{model!r} is not a local model folder; the ONNX encoder needs one")
    folder = encoders_dir() / encoder_id(sha, precision)
    if _usable(folder):
        return folder
    _check_writable(folder.parent)  # before loading torch and the model (tens of seconds) to write there
    if precision == "int8":
        return quantize(ensure_export(model, sha, check_texts, say), folder, say)
    return export(model, folder, sha, check_texts, say)


def _restore_logging(handlers: list[Any], level: int) -> None:
    root = logging.getLogger()
    root.handlers[:] = handlers
    root.setLevel(level)


def _check_writable(folder: Path) -> None:
    """ConfigError naming ``folder`` and the fix unless an encoder can be written into it (a read-only
    ``SIEVE_HOME``: the export would fail only after loading torch and tracing the model)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=".probe-", dir=folder))
    except OSError as exc:
        from rag.paths import sieve_home

        raise ConfigError(
            f"cannot write the ONNX encoder to {folder} ({exc.strerror or exc}); it is exported there once per "
            f"model. Set SIEVE_HOME to a writable folder (now {sieve_home()}; give --index-dir if the index is "
            "in it), or copy the encoder folder there from a machine that has it") from None


def quantize(source: Path, dest: Path, say: Callable[[str], None] | None = None) -> Path:
    """An int8 copy of the fp32 export in ``source``: ONNX Runtime's dynamic quantization (int8 weights of
    every MatMul, one scale per output channel, activations quantized per batch at run time). Smaller and
    faster on CPU; its vectors differ from fp32 (the lowest cosine on the sample texts is recorded, and a copy
    below MIN_INT8_COSINE is refused), so an index built with it is queried with it too (the manifest says so).

    Per-channel scales are what keeps the vectors close: one scale per tensor gave a lowest cosine of 0.78 to
    fp32 on 300 Polygraph chunks, on AVX2 and on AVX-512 VNNI CPUs alike, per-channel 0.98. ``reduce_range``
    (7-bit weights) guards CPUs without VNNI, whose uint8 x int8 products are summed in 16 bits and saturate
    at full range; it was also the fastest variant on both CPUs measured."""
    started = time.perf_counter()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:  # needs the onnx package
        raise ModelError(f"int8 quantization needs the onnx package ({exc}); pip install onnx") from None
    finally:
        _restore_logging(handlers, level)
    recipe = {"recipe": INT8_RECIPE, "method": "onnxruntime.quantize_dynamic", **INT8_OPTIONS}
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.quantize-", dir=dest.parent))
    try:
        root.setLevel(max(level, logging.ERROR))  # its pre-processing advice
        options = {**INT8_OPTIONS, "weight_type": QuantType[INT8_OPTIONS["weight_type"]]}
        quantize_dynamic(str(source / ONNX_FILE), str(tmp / ONNX_FILE), **options)
        shutil.copy(source / TOKENIZER_FILE, tmp / TOKENIZER_FILE)
        meta = json.loads((source / META_FILE).read_text(encoding="utf-8"))
        meta.update(id=dest.name, precision="int8", quantized_from=source.name, quantization=recipe)
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        texts = list(SAMPLE_TEXTS)
        worst = float(_cosines(OnnxEncoder(tmp).encode(texts), OnnxEncoder(source).encode(texts)).min())
        if worst < MIN_INT8_COSINE:
            raise ModelError(f"the int8 encoder's vectors differ too much from fp32's on this CPU (lowest cosine "
                             f"{worst:.4f} < {MIN_INT8_COSINE}); index with embedding_precision=fp32")
        meta.update(checked={"texts": len(texts), "min_cosine_to_fp32": round(worst, 6)},
                    onnx_sha256=_sha256_file(tmp / ONNX_FILE), export_seconds=round(time.perf_counter() - started, 1))
        _publish(tmp, dest, meta)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:  # the quantizer configures the root logger (a stderr handler): later libraries' debug lines would print
        _restore_logging(handlers, level)
    if say:
        say(f"quantized the ONNX encoder to int8 in {time.perf_counter() - started:.1f}s (lowest cosine to fp32 "
            f"{worst:.4f}): {dest}")
    return dest


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
