"""Building the on-disk index (rag.index.store) atomically.

Dense index type (the ``dense_index`` setting): ``auto`` builds an exact ``IndexFlatIP`` up to
:data:`HNSW_THRESHOLD` chunks and an approximate ``IndexHNSWFlat`` (M=32, efConstruction=200,
efSearch >= 128) above it, where exact search passes 10 ms per query on 2 cores
(``benchmarks/scale.py``); ``flat`` and ``hnsw`` force one kind at any size.

The index is written into a temporary sibling folder and renamed into place only when complete,
so an interrupted or failed build never leaves a half-written folder that looks like an index; a full
disk is one line saying the old index is kept and how much space the new one needs (rag.index.space).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from rag.config import Settings
from rag.errors import IndexMismatch, InputError
from rag.index.layout import (
    BM25_DIR,
    CHUNKS,
    EMBEDDINGS,
    FAISS_FILE,
    MANIFEST,
    TABLES,
    WINDOW_OWNERS,
    WINDOWS_FAISS,
    build_lock,
    build_target,
    check_target,
    terminate_as_interrupt,
)
from rag.index.space import bytes_needed, full_disk_error, out_of_space
from rag.index.store import (
    BM25_B,
    BM25_K1,
    BM25_METHOD,
    BM25_STEMMER,
    BM25_STOPWORDS,
    FORMAT,
    Index,
    _stemmer,
    fingerprint,
    index_text,
)
from rag.ingest.chunking import Chunk
from rag.ingest.jsonl import split_lines

HNSW_THRESHOLD = 50_000
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 200


def _text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _previous_vectors(index_dir: Path, model_path: str, precision: str = "fp32") -> dict[str, np.ndarray]:
    """text-hash -> vector from an existing index built with the same model at the same precision (empty if
    none/unusable)."""
    try:
        manifest = json.loads((index_dir / MANIFEST).read_text(encoding="utf-8"))
        if manifest["embedding"]["path"] != model_path or manifest.get("format") != FORMAT:
            return {}
        if (manifest["embedding"].get("encoder") or {}).get("precision", "fp32") != precision:
            return {}
        old = [json.loads(line) for line in split_lines((index_dir / CHUNKS).read_text(encoding="utf-8")) if line]
        vectors = np.load(index_dir / EMBEDDINGS)
        if len(old) != vectors.shape[0]:
            return {}
        return {_text_key(index_text(Chunk(**rec))): vectors[i] for i, rec in enumerate(old)}
    except Exception:  # noqa: BLE001 - no previous index, or an unreadable one: embed everything
        return {}


def build_index(chunks: Sequence[Chunk], index_dir: str | Path | None = None, settings: Settings | None = None,
                show_progress: bool = True, *, source: str = "builtin", hnsw_threshold: int = HNSW_THRESHOLD,
                embedder: Callable[[list[str]], np.ndarray] | None = None,
                tables: Sequence[Path] | None = None) -> Index:
    """Build (or rebuild) the index for ``chunks`` at ``index_dir`` and return it loaded.

    ``source`` records where the chunks came from (``builtin``, ``folder:PATH``, ``jsonl:FILE``) so
    error messages can print the exact rebuild command. Embeddings of chunks whose indexed text is
    unchanged since the previous build in ``index_dir`` (same model) are reused, not recomputed.
    Before any embedding: the chunks are checked, ``index_dir`` must be absent, empty or a Sieve index
    (rag.index.layout), and no other build may be writing it. ``embedder(texts)`` replaces the in-process
    embedding; one with ``uses_index_encoder = True`` (``rag.distributed.embed``, on Ray workers) is called as
    ``embedder(texts, encoder=, record=)`` with the encoder a local build uses, and must return what
    ``encoder.encode(texts)`` would; the manifest records that encoder, as for a local build.

    ``tables``: table files (rag.data.tableset.TABLE_SUFFIXES) read into ``tables.duckdb`` in the index, first,
    before any embedding, so a file that cannot be read stops the build at once (InputError naming it); the
    database is moved into the new folder and swapped in with the rest, and its record is ``manifest["tables"]``.
    A rebuild without tables leaves none: the swap replaces the whole folder.
    """
    settings = settings or Settings()
    hnsw_threshold = {"flat": 2**62, "hnsw": 0}.get(settings.dense_index, hnsw_threshold)
    root = Path(index_dir if index_dir is not None else settings.index_dir).expanduser()
    chunks = list(chunks)
    if not chunks:
        raise InputError("nothing to index: the corpus produced no chunks (empty files?)")
    seen: set[str] = set()
    for c in chunks:
        if c.id in seen:
            raise InputError(f"duplicate chunk id {c.id!r}; chunk ids must be unique")
        seen.add(c.id)
        _check_unicode(c)
        doc = c.meta.get("doc_id") if isinstance(c.meta, dict) else None
        if doc is not None and not isinstance(doc, (str, int, float)):  # counted as documents: must be hashable
            raise InputError(f"chunk {c.id!r}: field 'doc_id' must be a string or a number, got {type(doc).__name__}")
    check_target(root)
    shown, root = root, build_target(root)  # a symbolic link's target is rebuilt; the link stays
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the index folder {root} ({exc.strerror or exc}); choose another --index-dir") from None
    with terminate_as_interrupt(), build_lock(root):
        _build(chunks, root, settings, show_progress, source, hnsw_threshold, embedder, list(tables or []))
    return Index.load(shown, settings)


def _check_unicode(chunk: Chunk) -> None:
    """A chunk's id, title and text must be valid Unicode (a lone surrogate cannot be written as UTF-8)."""
    for name in ("id", "title", "text", "source", "url", "meta"):
        value = getattr(chunk, name) if name != "meta" else json.dumps(chunk.meta, ensure_ascii=False)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            shown = value.encode("utf-8", "backslashreplace").decode("utf-8")
            raise InputError(f"chunk {chunk.id.encode('utf-8', 'backslashreplace').decode()!r}: field {name!r} is not "
                             f"valid Unicode (character {exc.start}: {shown[:60]!r}); fix the source text") from None


def _build(chunks: list[Chunk], root: Path, settings: Settings, show_progress: bool, source: str,
           hnsw_threshold: int, embedder: Callable[[list[str]], np.ndarray] | None = None,
           tables: list[Path] | None = None) -> None:
    """The tables first (into a staging folder beside ``root``, removed afterwards), then the index files."""
    if not tables:
        _write(chunks, root, settings, show_progress, source, hnsw_threshold, embedder, None)
        return
    from rag.data.tableset import build_database

    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{root.name}.tables-", dir=root.parent))
    except OSError as exc:
        if out_of_space(exc):
            size = sum(p.stat().st_size for p in tables if p.is_file())
            raise full_disk_error(root, (root / MANIFEST).exists(), size) from None
        raise
    try:
        t = time.perf_counter()
        record = build_database(tables, stage / TABLES, show_progress=show_progress)
        if show_progress:
            print(f"tables: {tables_line(record)}", file=sys.stderr)
        _write(chunks, root, settings, show_progress, source, hnsw_threshold, embedder,
               (record, stage / TABLES, round(time.perf_counter() - t, 3)))
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def tables_line(record: dict[str, Any]) -> str:
    """``claims (1,204 rows), shipments (310 rows)``: a manifest's tables record, for progress and the last line."""
    return ", ".join(f"{t['name']} ({t['rows']:,} row{'' if t['rows'] == 1 else 's'})"
                     for t in record.get("tables", []))


def _write(chunks: list[Chunk], root: Path, settings: Settings, show_progress: bool, source: str,
           hnsw_threshold: int, embedder: Callable[[list[str]], np.ndarray] | None,
           tables: tuple[dict[str, Any], Path, float] | None) -> None:
    """Embed, then write the index into a temporary sibling of ``root`` and swap it in; ``tables`` is the record,
    database file and seconds of :func:`_build`'s tables, moved into the new folder."""
    import bm25s
    import faiss

    from rag.index.embeddings import embedding_dim, model_label, resolve_model_path
    from rag.index.encoder import index_encoder
    from rag.index.export import encoder_id, model_sha256

    started = time.perf_counter()
    texts = [index_text(c) for c in chunks]
    timings: dict[str, float] = {} if tables is None else {"tables_seconds": tables[2]}
    adapted = None
    if settings.adapt_encoder:  # fine-tune a copy of the model on these passages first (rag.index.adapt)
        from rag.index.adapt import adapted_encoder

        if embedder is not None and not getattr(embedder, "uses_index_encoder", False):
            raise InputError("adapt_encoder needs the build's own encoder; this embedder brings its own vectors")
        t = time.perf_counter()
        folder, meta = adapted_encoder(texts, settings.embedding_model, corpus=source, show_progress=show_progress,
                                       log=(lambda m: print(m, file=sys.stderr)) if show_progress else None)
        adapted = {"base": settings.embedding_model, "folder": str(folder), "version": meta["version"],
                   "method": meta["method"], "pairs": meta["pairs"], "steps": meta["steps"],
                   "train_seconds": meta["seconds"]}
        timings["adapt_seconds"] = round(time.perf_counter() - t, 3)
        settings = settings.replace(embedding_model=str(folder))
    model_path = resolve_model_path(settings.embedding_model)

    # the encoder: ONNX Runtime over the model's export (made once per model), or sentence-transformers
    # (also for an embedder that ``uses_index_encoder``, rag.distributed.embed: the export is made here, once,
    # before any worker starts, and the workers embed with exactly this encoder)
    t = time.perf_counter()
    own_encoder = embedder is None or getattr(embedder, "uses_index_encoder", False)
    if own_encoder:
        say = (lambda message: print(message, file=sys.stderr)) if show_progress else None
        encoder, encoder_record = index_encoder(settings.embedding_model, settings.embedding_runtime, texts[:64], say,
                                                settings.embedding_precision)
        dim = int(encoder_record.get("dim") or embedding_dim(settings.embedding_model))
    else:  # a plain ``embedder(texts)`` (benchmarks: given vectors): recorded as sentence-transformers
        sha = model_sha256(model_path)
        encoder_record = {"runtime": "sentence-transformers", "id": encoder_id(sha) if sha else None,
                          "precision": "fp32", "model_sha256": sha}
        dim = embedding_dim(settings.embedding_model)
    timings["encoder_seconds"] = round(time.perf_counter() - t, 3)

    # dense vectors, reusing unchanged ones
    previous = _previous_vectors(root, model_path, encoder_record.get("precision", "fp32"))
    keys = [_text_key(t) for t in texts]
    todo = [i for i, k in enumerate(keys) if k not in previous]
    queued = set(todo)  # membership in a set: the list made this loop quadratic (61 s of a 100k-chunk build)
    vectors = np.zeros((len(chunks), dim), dtype=np.float32)
    for i, k in enumerate(keys):
        if k in previous and previous[k].shape == (dim,):
            vectors[i] = previous[k]
        elif i not in queued:
            todo.append(i)
            queued.add(i)
    if show_progress:
        print(f"embedding {len(todo)} of {len(chunks)} chunks ({len(chunks) - len(todo)} reused)", file=sys.stderr)

    def encode(batch: list[str], unit: str = "chunk") -> np.ndarray:
        if embedder is None:
            return _encode(encoder, batch, show_progress, unit)
        if own_encoder:
            return embedder(batch, encoder=encoder, record=encoder_record)
        return embedder(batch)

    t = time.perf_counter()
    if todo:
        vectors[todo] = encode([texts[i] for i in todo])
    timings["embed_seconds"] = round(time.perf_counter() - t, 3)
    windows = None
    if settings.dense_windows:
        t = time.perf_counter()
        windows = _windows(chunks, root, vectors, model_path, encoder_record.get("precision", "fp32"),
                           settings.dense_windows, encode, show_progress)
        timings["windows_seconds"] = round(time.perf_counter() - t, 3)

    had_index = (root / MANIFEST).exists()
    need = bytes_needed(len(chunks), dim, sum(len(t) for t in texts), len(chunks) > hnsw_threshold,
                        0 if windows is None else len(windows[1]))
    need += tables[1].stat().st_size if tables is not None else 0
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.building-", dir=root.parent))
    except OSError as exc:
        if out_of_space(exc):
            raise full_disk_error(root, had_index, need) from None
        raise
    try:
        with open(tmp / CHUNKS, "w", encoding="utf-8") as f:
            for c in chunks:
                f.write(json.dumps(c.to_dict(), ensure_ascii=False) + "\n")
        if show_progress:
            print("indexing bm25", file=sys.stderr)
        t = time.perf_counter()
        retriever = bm25s.BM25(method=BM25_METHOD, k1=BM25_K1, b=BM25_B)
        retriever.index(bm25s.tokenize(texts, stopwords=BM25_STOPWORDS or [], stemmer=_stemmer(BM25_STEMMER),
                                       show_progress=False), show_progress=False)
        timings["bm25_seconds"] = round(time.perf_counter() - t, 3)
        retriever.save(str(tmp / BM25_DIR))
        t = time.perf_counter()
        dense = _faiss_index(vectors, hnsw_threshold)
        if windows is not None:
            faiss.write_index(_faiss_index(windows[0], hnsw_threshold), str(tmp / WINDOWS_FAISS))
            np.save(tmp / WINDOW_OWNERS, windows[1])
        timings["faiss_seconds"] = round(time.perf_counter() - t, 3)
        faiss.write_index(dense, str(tmp / FAISS_FILE))
        np.save(tmp / EMBEDDINGS, vectors)
        if tables is not None:
            os.replace(tables[1], tmp / TABLES)  # built first (rag.data.tableset), its connection closed
        from rag.version import __version__

        manifest = {
            "format": FORMAT,
            "sieve_version": __version__,
            "built_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "build_seconds": round(time.perf_counter() - started + timings.get("tables_seconds", 0), 3),
            "timings": timings,
            "embedding": {"model": settings.embedding_model, "label": model_label(settings.embedding_model),
                          "path": model_path, "dim": dim, "normalized": True, "encoder": encoder_record,
                          **({"adapted": adapted} if adapted else {})},
            "chunker": ({"prechunked": True} if source.startswith("jsonl:") else
                        {"prechunked": False, "size": settings.chunk_size, "overlap": settings.chunk_overlap}),
            "corpus": {"source": source, "fingerprint": fingerprint(chunks)},
            "counts": {"chunks": len(chunks), "documents": len({c.meta.get("doc_id", c.source) for c in chunks}),
                       "characters": sum(len(c.text) for c in chunks), "embeddings_reused": len(chunks) - len(todo)},
            "bm25": {"method": BM25_METHOD, "k1": BM25_K1, "b": BM25_B, "stemmer": BM25_STEMMER, "stopwords": BM25_STOPWORDS},
            "faiss": {"type": type(dense).__name__, "hnsw_threshold": hnsw_threshold,
                      **({"M": HNSW_M, "efConstruction": HNSW_EF_CONSTRUCTION} if len(chunks) > hnsw_threshold else {})},
            "indexed_text": "title + newline + text (see rag.index.store.index_text)",
            **({"windows": windows[2]} if windows is not None else {}),
        }
        if tables is not None:
            manifest["tables"] = tables[0]
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        _check_loads(tmp, settings)  # a new index that cannot be read never replaces a working one
        _swap_into_place(tmp, root)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if out_of_space(exc):
            raise full_disk_error(root, had_index, need) from None
        raise
    if show_progress:
        print(f"indexed {len(chunks)} chunks into {root} in {manifest['build_seconds']:.1f}s", file=sys.stderr)


def _faiss_index(vectors: np.ndarray, hnsw_threshold: int) -> Any:
    """An exact (flat) inner-product FAISS index of ``vectors``, HNSW above ``hnsw_threshold`` of them."""
    import faiss

    if len(vectors) > hnsw_threshold:
        dense = faiss.IndexHNSWFlat(vectors.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
        dense.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    else:
        dense = faiss.IndexFlatIP(vectors.shape[1])
    dense.add(vectors)
    return dense


def _title_and_body(chunk: Chunk) -> tuple[str, str]:
    """(the title line index_text puts first, or "", the chunk's text)."""
    whole = index_text(chunk)
    return whole[:len(whole) - len(chunk.text)], chunk.text


def _windows(chunks: list[Chunk], root: Path, vectors: np.ndarray, model_path: str, precision: str, tokens: int,
             encode: Callable[[list[str]], np.ndarray], show_progress: bool) -> tuple[np.ndarray, np.ndarray, dict] | None:
    """The passage windows' vectors, owners and record (rag.index.windows), reusing the vectors of unchanged windows
    from the index at ``root``; None, with a note, for a model without a fast tokenizer."""
    from rag.index.windows import previous_windows, tokenizer_for, window_vectors

    tokenizer = tokenizer_for(model_path)
    if tokenizer is None:
        print(f"Note: no passage windows (dense_windows): {model_path} has no tokenizer.json; each chunk has one "
              "vector", file=sys.stderr)
        return None
    texts = [_title_and_body(c) for c in chunks]
    previous: dict[str, np.ndarray] = {}
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        record = manifest.get("windows") or {}
        same = (manifest["embedding"]["path"] == model_path and record.get("tokens") == tokens
                and (manifest["embedding"].get("encoder") or {}).get("precision", "fp32") == precision)
        if same:
            import faiss

            old = [Chunk(**json.loads(line)) for line in split_lines((root / CHUNKS).read_text(encoding="utf-8")) if line]
            dense = faiss.read_index(str(root / WINDOWS_FAISS))
            previous = previous_windows([_title_and_body(c) for c in old], dense.reconstruct_n(0, dense.ntotal),
                                        np.load(root / WINDOW_OWNERS), tokenizer, tokens, _text_key)
    except Exception:  # noqa: BLE001 - no previous index, or an unreadable one: embed every window
        previous = {}

    def say(windows: int, long_chunks: int, todo: int) -> None:
        if show_progress:
            print(f"embedding {todo} of {windows} windows of the {long_chunks} chunks longer than {tokens} tokens "
                  f"({windows - todo} reused)", file=sys.stderr)

    return window_vectors(texts, vectors, tokenizer, tokens, lambda batch: encode(batch, "window"), previous,
                          _text_key, say)


def _encode(encoder: Any, texts: list[str], show_progress: bool, unit: str = "chunk") -> np.ndarray:
    """``encoder.encode(texts)`` with a progress bar on stderr when asked."""
    bar = None
    if show_progress:
        try:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), desc="embedding", unit=unit, file=sys.stderr)
        except ImportError:
            pass
    try:
        return encoder.encode(texts, progress=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()


def _check_loads(tmp: Path, settings: Settings) -> None:
    """Read every part of the index just written in ``tmp``, as ``Index.load`` and the first search will."""
    index = Index.load(tmp, settings)
    index.bm25, index.faiss  # noqa: B018 - loaded on first use; read them now
    if index.tables_path is not None:  # the database opens as the query side opens it, and holds every table
        import duckdb

        with duckdb.connect(str(index.tables_path), read_only=True) as con:
            held = {name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        lost = [t["name"] for t in index.tables_record.get("tables", []) if t["name"] not in held]
        if lost:
            raise IndexMismatch(f"the new {TABLES} lacks the tables {', '.join(lost)}; the old index was kept")


def _swap_into_place(tmp: Path, root: Path) -> None:
    """Replace ``root`` by the complete ``tmp`` with renames only (the old index is removed last).

    ``root`` is checked again (it was checked before embedding): only a Sieve index is ever replaced."""
    check_target(root)
    old = None
    if root.exists():
        old = root.with_name(f".{root.name}.old-{os.getpid()}-{int(time.time())}")
        os.replace(root, old)
    os.replace(tmp, root)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
