"""The on-disk index: bm25s + FAISS + chunk store + manifest, built atomically.

Layout of an index directory::

    manifest.json     what this index is (Sieve version, embedding model, chunker settings,
                      corpus fingerprint, counts, build time, file sizes)
    chunks.jsonl      the chunk store, one Chunk per line, in row order
    bm25/             the bm25s index in bm25s's own save format
    dense.faiss       FAISS index over L2-normalised embeddings (inner product = cosine)
    embeddings.npy    the same vectors, row-aligned with chunks.jsonl; lets a re-index reuse them
    tables.duckdb     only with tables: the table files given to the build, in one DuckDB database
                      (rag.data.tableset); the manifest's ``tables`` record describes them

Dense index type (the ``dense_index`` setting): ``auto`` builds an exact ``IndexFlatIP`` up to
:data:`HNSW_THRESHOLD` chunks and an approximate ``IndexHNSWFlat`` (M=32, efConstruction=200,
efSearch >= 128) above it, where exact search passes 10 ms per query on 2 cores
(``benchmarks/scale.py``); ``flat`` and ``hnsw`` force one kind at any size.

The index is written into a temporary sibling folder and renamed into place only when complete,
so an interrupted or failed build never leaves a half-written folder that looks like an index; a full
disk is one line saying the old index is kept and how much space the new one needs (rag.index.space).
:meth:`Index.load` opens every file of the folder at once and reads the bm25s and FAISS parts from those open
files later (rag.index.generation), so a search never pairs one build's chunks with another's rows.
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

from rag.config import Settings, default_index_dir
from rag.errors import IndexMismatch, IndexNotFound, InputError
from rag.index.generation import ATTEMPTS, Changing, Generation, pin
from rag.index.layout import (
    BM25_DIR,
    CHUNKS,
    EMBEDDINGS,
    FAISS_FILE,
    MANIFEST,
    REQUIRED,
    TABLES,
    WINDOW_OWNERS,
    WINDOWS_FAISS,
    build_lock,
    build_target,
    check_target,
    terminate_as_interrupt,
)
from rag.index.space import bytes_needed, full_disk_error, out_of_space
from rag.ingest.chunking import Chunk
from rag.ingest.jsonl import split_lines

FORMAT = 1
HNSW_THRESHOLD = 50_000
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 128

# bm25s analysis: Lucene's BM25 variant (k1=1.2, b=0.75), lower-cased word tokens, English stopwords,
# no stemming. Tuned on the polygraph dev half (25 items with gold, Recall@4 / MRR@4):
#   bm25 alone   stopwords, no stemmer 0.717/0.753  |  + Snowball stemmer 0.690/0.687
#   hybrid (RRF) stopwords, no stemmer 0.787/0.797  |  + Snowball stemmer 0.780/0.770
# (technical vocabulary such as "builder"/"build", "drivers"/"driver" loses precision when conflated).
# k1 in {0.9, 1.2, 1.5} x b in {0.4, 0.75, 0.9} found nothing better than 1.2/0.75.
# The analysis used at build time is recorded in the manifest and reused for queries.
BM25_METHOD = "lucene"
BM25_K1 = 1.2
BM25_B = 0.75
BM25_STEMMER: str | None = None  # e.g. "english" to use PyStemmer's Snowball stemmer
BM25_STOPWORDS = "en"


def index_text(chunk: Chunk) -> str:
    """What is embedded and bm25-indexed for a chunk: its title (heading path, plus a JSONL record's
    ``section``) on the first line, then its text. Titles carry the page/section topic a passage often
    omits; on the polygraph dev half they raised Recall@4 for dense (0.68 -> 0.74), bm25 (0.64 -> 0.72)
    and hybrid (0.74 -> 0.79) alike (see rag.retrieval.retriever)."""
    title = chunk.title
    section = chunk.meta.get("section") if isinstance(chunk.meta, dict) else None
    if isinstance(section, str) and section and section not in title:
        title = f"{title} > {section}" if title else section
    return f"{title}\n{chunk.text}" if title else chunk.text


def fingerprint(chunks: Sequence[Chunk]) -> str:
    """Content hash of a corpus (ids, titles, texts, in order): equal fingerprints = same chunks."""
    h = hashlib.sha256()
    for c in chunks:
        for part in (c.id, c.title, c.text):
            h.update(part.encode("utf-8"))
            h.update(b"\x00")
        h.update(b"\x01")
    return h.hexdigest()[:20]


def _text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _stemmer(language: str | None) -> Any:
    if not language:
        return None
    import Stemmer

    return Stemmer.Stemmer(language)


def bm25_tokenize(texts: list[str], stemmer: str | None = BM25_STEMMER, stopwords: str | None = BM25_STOPWORDS,
                  show_progress: bool = False) -> list[list[str]]:
    """bm25s analysis (lower-case word tokens, minus ``stopwords``, ``stemmer``-stemmed) as string tokens."""
    import bm25s

    return bm25s.tokenize(texts, stopwords=stopwords or [], stemmer=_stemmer(stemmer), return_ids=False,
                          show_progress=show_progress)


class Index:
    """A loaded index. Use :meth:`load` (or :func:`build_index`); retrieval logic lives in rag.retrieval.retriever.

    The bm25s and FAISS parts are read on first use (``bm25_search``, ``dense_search``) when not given, so a
    process that searches in one mode never imports the other's library: bm25s brings scipy with it, ~0.3 s of
    a cold ``rag search --mode dense``; faiss ~0.1 s of a ``--mode bm25`` one."""

    def __init__(self, index_dir: Path, chunks: list[Chunk], manifest: dict[str, Any], bm25: Any, faiss_index: Any,
                 embeddings: np.ndarray, embedding_model: str, *, generation: Generation | None = None) -> None:
        self.dir = Path(index_dir)
        self._generation = generation  # the open files of the build the chunks came from (rag.index.generation)
        self.chunks = chunks
        self.by_id = {c.id: c for c in chunks}
        self.manifest = manifest
        self.fingerprint: str = manifest["corpus"]["fingerprint"]
        self._bm25 = bm25
        self._faiss = faiss_index
        self.embeddings = embeddings
        self.embedding_model = embedding_model
        self.embedding_runtime = "onnx"  # Index.load sets settings.embedding_runtime
        self._query_encoder: Any = None
        self._windows: tuple[Any, np.ndarray] | None = None
        self.use_windows = True  # Index.load sets settings.dense_windows != 0: 0 searches one vector per chunk
        self.position = {c.id: i for i, c in enumerate(chunks)}
        # the tables beside the documents (rag.data.tableset): the manifest's record and the database file, or None
        self.tables_record: dict[str, Any] | None = manifest.get("tables") or None
        self.tables_path: Path | None = self.dir / TABLES if self.tables_record else None

    def __len__(self) -> int:
        return len(self.chunks)

    def __repr__(self) -> str:
        return f"Index({str(self.dir)!r}, chunks={len(self.chunks)}, model={self.embedding_model!r})"

    @property
    def bm25(self) -> Any:
        """The bm25s index (``bm25/``), read on first use (from the files :meth:`load` opened)."""
        if self._bm25 is None:
            gen = self._generation
            if gen is not None:
                read = lambda: gen.part(BM25_DIR, gen.bm25)  # noqa: E731
            else:  # an Index made by hand for a folder
                import bm25s

                read = lambda: bm25s.BM25.load(str(self.dir / BM25_DIR), mmap=False, show_progress=False)  # noqa: E731
            self._bm25 = self._read_part(BM25_DIR, read, lambda bm25: int(bm25.scores["num_docs"]))
        return self._bm25

    @property
    def faiss(self) -> Any:
        """The FAISS index (``dense.faiss``), read on first use (from the files :meth:`load` opened)."""
        if self._faiss is None:
            gen = self._generation
            if gen is not None:
                read = lambda: gen.part(FAISS_FILE, lambda: gen.faiss(FAISS_FILE))  # noqa: E731
            else:
                import faiss

                read = lambda: faiss.read_index(str(self.dir / FAISS_FILE))  # noqa: E731
            self._faiss = self._read_part(FAISS_FILE, read, lambda dense: dense.ntotal)
        return self._faiss

    def _read_part(self, name: str, read: Callable[[], Any], size: Callable[[Any], int]) -> Any:
        """``read()`` one part of the index; a failure, or a part of another size than the chunk store, means the
        folder is damaged (IndexMismatch naming the rebuild command, as :meth:`load` does)."""
        try:
            part = read()
            rows = size(part)
        except Exception as exc:  # noqa: BLE001 - any failure to read a part means the folder is damaged
            raise IndexMismatch(f"Index at {self.dir} is corrupt ({name}: {type(exc).__name__}: {exc}). "
                                f"Rebuild it with: {rebuild_command(self.dir, self.manifest)}") from None
        if rows != len(self.chunks):
            raise IndexMismatch(f"Index at {self.dir} is inconsistent ({name} holds {rows} chunks, chunks.jsonl "
                                f"{len(self.chunks)}). Rebuild it with: {rebuild_command(self.dir, self.manifest)}")
        return part

    # ------------------------------------------------------------------ raw lookups
    def bm25_query(self, text: str) -> list[str]:
        """``text`` analysed exactly as this index's chunks were (settings from the manifest)."""
        cfg = self.manifest.get("bm25", {})
        return bm25_tokenize([text], cfg.get("stemmer"), cfg.get("stopwords"))[0]

    def bm25_search(self, tokens: list[str], n: int) -> list[tuple[int, float]]:
        """Top ``n`` (row, score) by BM25 for already-analysed query ``tokens``; zero-score rows are dropped."""
        vocab = self.bm25.vocab_dict
        ids = [vocab[t] for t in tokens if t in vocab]
        if not ids:
            return []
        scores = np.asarray(self.bm25.get_scores(ids), dtype=np.float32)
        n = min(n, len(scores))
        top = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(i), float(scores[i])) for i in top if scores[i] > 0]

    @property
    def query_encoder(self) -> Any:
        """The encoder whose vectors match this index's (rag.index.encoder.query_encoder), loaded on first use:
        ONNX Runtime by default, so a query never imports torch."""
        if self._query_encoder is None:
            from rag.index.encoder import query_encoder

            self._query_encoder = query_encoder(self.manifest, self.embedding_runtime,
                                                rebuild_command(self.dir, self.manifest))
        return self._query_encoder

    def embed_query(self, text: str) -> np.ndarray:
        """The normalised vector of one query, from :attr:`query_encoder`."""
        return np.asarray(self.query_encoder.encode([text])[0], dtype=np.float32)

    @property
    def windows_searched(self) -> int:
        """The word pieces per window the dense search reads (0: one vector per chunk), as a run records it."""
        return int((self.manifest.get("windows") or {}).get("tokens", 0)) if self.use_windows else 0

    @property
    def windows(self) -> tuple[Any, np.ndarray] | None:
        """The passage windows' FAISS index and owners (rag.index.windows), read on first use; None in an index
        built without them (``dense_windows = 0``, or before they existed), whose chunks have one vector each."""
        record = self.manifest.get("windows")
        if not record:
            return None
        if self._windows is None:
            self.faiss  # noqa: B018 - read (and checked) too: a damaged dense.faiss is named, not left unnoticed
            gen = self._generation

            def read() -> tuple[Any, np.ndarray]:
                if gen is not None:
                    part = gen.faiss(WINDOWS_FAISS), gen.load_npy(WINDOW_OWNERS)
                    gen.release(WINDOW_OWNERS)
                    return part
                import faiss

                return faiss.read_index(str(self.dir / WINDOWS_FAISS)), np.load(self.dir / WINDOW_OWNERS)

            try:
                part = gen.part(WINDOWS_FAISS, read) if gen is not None else read()
                dense, owners = part
            except Exception as exc:  # noqa: BLE001 - any failure to read a part means the folder is damaged
                raise IndexMismatch(f"Index at {self.dir} is corrupt ({WINDOWS_FAISS}: {type(exc).__name__}: {exc}). "
                                    f"Rebuild it with: {rebuild_command(self.dir, self.manifest)}") from None
            if not (dense.ntotal == len(owners) == record.get("count")) or (len(owners) and (
                    int(owners.max()) >= len(self.chunks) or int(owners.min()) < 0)):
                raise IndexMismatch(f"Index at {self.dir} is inconsistent ({WINDOWS_FAISS} holds {dense.ntotal} "
                                    f"windows, {WINDOW_OWNERS} {len(owners)}, the manifest {record.get('count')}). "
                                    f"Rebuild it with: {rebuild_command(self.dir, self.manifest)}")
            self._windows = part
        return self._windows

    def dense_search(self, vector: np.ndarray, n: int) -> list[tuple[int, float]]:
        """Top ``n`` (row, cosine) for a normalised query vector: a chunk's best window's cosine where the index has
        passage windows (rag.index.windows) and :attr:`use_windows`, its own vector's otherwise."""
        windows = self.windows if self.use_windows else None
        if windows is None:
            return _faiss_search(self.faiss, vector, n)
        from rag.index.windows import best_by_owner

        dense, owners = windows
        return best_by_owner(lambda v, m: _faiss_search(dense, v, m), owners, vector, min(n, len(self.chunks)),
                             dense.ntotal)

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, index_dir: str | Path | None = None, settings: Settings | None = None) -> "Index":
        """Open the index at ``index_dir`` (default: ``settings.index_dir``).

        Raises :class:`IndexNotFound` when there is none, :class:`IndexMismatch` when it was built with
        another embedding model than ``settings.embedding_model`` or a file is missing or corrupt (the bm25s and
        FAISS files are read, and found corrupt, on first use).
        """
        settings = settings or Settings()
        root = Path(index_dir if index_dir is not None else settings.index_dir).expanduser()
        try:
            gen = pin(root)  # every file of one build, open: a rebuild meanwhile cannot mix its files in
        except Changing:
            raise IndexMismatch(f"Index at {root} was replaced {ATTEMPTS} times while being opened (a rag index "
                                "rebuilding it in a loop?); run the command again") from None
        except OSError as exc:
            raise IndexMismatch(f"Index at {root} cannot be read ({exc.strerror or exc}); check its permissions, "
                                "or choose another --index-dir") from None
        if gen is None or not gen.has(MANIFEST):
            hint = "" if root == default_index_dir() else f" --index-dir {_q(root)}"
            raise IndexNotFound(f"No index at {root}. Build one with: rag index{hint}")
        try:
            manifest = json.loads(gen.read_text(MANIFEST))
            fp = manifest["corpus"]["fingerprint"]
            built_with = manifest["embedding"]["model"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexMismatch(f"Index at {root} is corrupt ({MANIFEST}: {exc}). Rebuild it with: {rebuild_command(root, {})}") from None
        if manifest.get("format") != FORMAT:
            raise IndexMismatch(f"Index at {root} has format {manifest.get('format')}, this Sieve reads format {FORMAT}. "
                                f"Rebuild it with: {rebuild_command(root, manifest)}")
        wanted = settings.embedding_model
        adapted_from = (manifest["embedding"].get("adapted") or {}).get("base")
        if wanted != built_with and wanted != adapted_from:  # an adapted encoder answers for its base model
            from rag.index.embeddings import resolve_model_path

            if resolve_model_path(wanted) != manifest["embedding"].get("path"):
                raise IndexMismatch(
                    f"Index at {root} was built with embedding model {built_with!r}, but embedding_model is {wanted!r}. "
                    f"Rebuild it with: {rebuild_command(root, manifest, wanted)} "
                    f"(or use the index's model: --embedding-model {_q(built_with)} / SIEVE_EMBEDDING_MODEL={built_with})"
                )
        wanted_files = (*REQUIRED, *((TABLES,) if manifest.get("tables") else ()),
                        *((WINDOWS_FAISS, WINDOW_OWNERS) if manifest.get("windows") else ()))
        missing = [name for name in wanted_files if name not in gen.names]
        if missing:
            raise IndexMismatch(f"Index at {root} is incomplete (missing {', '.join(missing)}). "
                                f"Rebuild it with: {rebuild_command(root, manifest)}")
        try:
            chunks = [Chunk(**json.loads(line)) for line in split_lines(gen.read_text(CHUNKS)) if line]
            embeddings = gen.memmap_npy(EMBEDDINGS)
        except Exception as exc:  # noqa: BLE001 - any failure to read a part means the folder is damaged
            raise IndexMismatch(f"Index at {root} is corrupt ({type(exc).__name__}: {exc}). "
                                f"Rebuild it with: {rebuild_command(root, manifest)}") from None
        gen.release(MANIFEST, CHUNKS, EMBEDDINGS)  # read (the vectors are mapped): only bm25/ and FAISS wait
        n = manifest.get("counts", {}).get("chunks")
        sizes = {"chunks.jsonl": len(chunks), "embeddings.npy": embeddings.shape[0]}
        if any(v != n for v in sizes.values()) or fingerprint(chunks) != fp:
            raise IndexMismatch(f"Index at {root} is inconsistent (manifest says {n} chunks; found {sizes}"
                                f"{'' if fingerprint(chunks) == fp else ', fingerprint differs'}). "
                                f"Rebuild it with: {rebuild_command(root, manifest)}")
        index = cls(root, chunks, manifest, None, None, embeddings, built_with, generation=gen)  # bm25, faiss: on first use
        index.embedding_runtime = settings.embedding_runtime
        index.use_windows = settings.dense_windows != 0
        return index


def _faiss_search(dense: Any, vector: np.ndarray, n: int) -> list[tuple[int, float]]:
    """Top ``n`` (row, inner product) of a FAISS index for one vector."""
    n = min(n, dense.ntotal)
    if hasattr(dense, "hnsw"):
        dense.hnsw.efSearch = max(HNSW_EF_SEARCH, 2 * n)
    scores, rows = dense.search(np.asarray(vector, dtype=np.float32).reshape(1, -1), n)
    return [(int(r), float(s)) for r, s in zip(rows[0], scores[0]) if r >= 0]


def _q(value: Any) -> str:
    text = str(value)
    return f'"{text}"' if any(ch in text for ch in " '\"$") else text


def rebuild_command(root: Path, manifest: dict[str, Any], model: str | None = None) -> str:
    """The ``rag index`` command that rebuilds ``root`` from the source recorded in its manifest."""
    source = manifest.get("corpus", {}).get("source", "") if isinstance(manifest, dict) else ""
    parts = ["rag index"]
    if source.startswith("folder:"):
        parts.append(_q(source.removeprefix("folder:")))
    elif source.startswith("jsonl:"):
        parts.append(f"--chunks {_q(source.removeprefix('jsonl:'))}")
    folder = Path(source.removeprefix("folder:")) if source.startswith("folder:") else None
    for table in (manifest.get("tables") or {}).get("sources", []) if isinstance(manifest, dict) else []:
        if folder is None or folder not in Path(table).parents:  # found in the folder: taken again by itself
            parts.append(f"--tables {_q(table)}")
    adapted = ((manifest.get("embedding") or {}).get("adapted") or {}) if isinstance(manifest, dict) else {}
    if adapted and model in (None, adapted.get("folder")):
        model = adapted.get("base")
    if model and model != "default":
        parts.append(f"--embedding-model {_q(model)}")
    if adapted:
        parts.append("--adapt-encoder")
    if Path(root) != default_index_dir():
        parts.append(f"--index-dir {_q(root)}")
    return " ".join(parts)


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
    from rag.index.encoder import encoder_id, index_encoder, model_sha256

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
