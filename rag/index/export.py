"""The ONNX export of a sentence-transformers model (transformer + pooling + L2 normalisation in one graph)
that :mod:`rag.index.encoder` embeds with, and its int8 copy (:func:`quantize`):

* **made once per model**, at ``rag index`` time (or at the first query on an index built before this
  encoder existed), by ``torch.onnx.export`` (the TorchScript exporter, opset 17; torch and
  sentence-transformers are needed for that step only), and kept in ``$SIEVE_HOME/encoders/<id>/``
  (``model.onnx``, ``tokenizer.json``, ``encoder.json``). ``<id>`` is derived from a sha256 of the model
  folder's files, so a changed model never silently reuses an old export;
* **checked before it is kept**: its vectors for sample texts must have cosine >= :data:`MIN_COSINE` with
  sentence-transformers' own (the export is refused otherwise, and the torch encoder is used).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from rag.config import ENCODER_PRECISIONS as PRECISIONS
from rag.errors import ConfigError, ModelError
from rag.index.encoder import BATCH_SIZE, META_FILE, ONNX_FILE, TOKENIZER_FILE, OnnxEncoder

ENCODER_VERSION = 1  # the export recipe; part of the encoder id, bump when export() changes what it writes
MIN_COSINE = 0.9999  # an export whose vectors differ more than this from sentence-transformers' is not used
# The int8 quantization recipe; part of an int8 encoder's id (so an index is never queried with another
# recipe's vectors), bump when quantize() changes what it writes. 1: one scale per weight tensor (lowest cosine
# to fp32 0.78 on 300 Polygraph chunks); 2: one scale per output channel, 7-bit weights (0.977-0.980).
INT8_RECIPE = 2
INT8_OPTIONS = {"weight_type": "QInt8", "per_channel": True, "reduce_range": True}  # onnxruntime quantize_dynamic
MIN_INT8_COSINE = 0.95  # an int8 model whose vectors differ more than this from fp32's is not used
OPSET = 17
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


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a * b).sum(axis=1)


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
