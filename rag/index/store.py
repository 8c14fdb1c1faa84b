"""The on-disk index: bm25s + FAISS + chunk store + manifest, as loaded and searched (built atomically by
rag.index.build).

Layout of an index directory::

    manifest.json     what this index is (Sieve version, embedding model, chunker settings,
                      corpus fingerprint, counts, build time, file sizes)
    chunks.jsonl      the chunk store, one Chunk per line, in row order
    bm25/             the bm25s index in bm25s's own save format
    dense.faiss       FAISS index over L2-normalised embeddings (inner product = cosine)
    embeddings.npy    the same vectors, row-aligned with chunks.jsonl; lets a re-index reuse them
    tables.duckdb     only with tables: the table files given to the build, in one DuckDB database
                      (rag.data.tableset); the manifest's ``tables`` record describes them

:meth:`Index.load` opens every file of the folder at once and reads the bm25s and FAISS parts from those open
files later (rag.index.generation), so a search never pairs one build's chunks with another's rows.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from rag.config import Settings, default_index_dir
from rag.errors import IndexMismatch, IndexNotFound
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
)
from rag.ingest.chunking import Chunk
from rag.ingest.jsonl import split_lines

FORMAT = 1
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
