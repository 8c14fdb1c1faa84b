"""Shared, built-once data for the retrieval tests (no conftest needed: results are cached per process).

``small_index()`` indexes a handful of built-in Python reference topics with the real embedded model,
real bm25s and real FAISS, once per test session, in a temporary folder removed at exit.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from rag.config import Settings

TOPICS = ["assert", "pass", "break", "continue", "del", "global", "if", "while", "lambda", "import", "return"]
SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"


@functools.lru_cache(maxsize=1)
def workdir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="sieve-retrieval-tests-"))
    atexit.register(shutil.rmtree, path, True)
    return path


def settings(**changes) -> Settings:
    base = Settings(index_dir=workdir() / "index", cache_dir=workdir() / "cache", chunk_size=600, chunk_overlap=80)
    return base.replace(**changes)


@functools.lru_cache(maxsize=1)
def small_chunks():
    from rag.ingest.chunking import chunk_documents
    from rag.ingest.corpus import load_builtin_topics

    s = settings()
    return tuple(chunk_documents(load_builtin_topics(TOPICS), size=s.chunk_size, overlap=s.chunk_overlap))


@functools.lru_cache(maxsize=1)
def small_index():
    """The session's index over ``TOPICS`` (read-only: copy it before changing anything)."""
    from rag.index.build import build_index

    return build_index(list(small_chunks()), workdir() / "index", settings(), show_progress=False)


@functools.lru_cache(maxsize=1)
def small_fp32_index():
    """``small_index()`` embedded in fp32 (the default is int8 on ONNX Runtime): vectors equal to
    sentence-transformers', for the tests that compare with the torch side (read-only: copy it first)."""
    from rag.index.build import build_index

    root = workdir() / "index-fp32"
    return build_index(list(small_chunks()), root, settings(index_dir=root, embedding_precision="fp32"),
                       show_progress=False)


def copy_index(dest: Path, fp32: bool = False) -> Path:
    shutil.copytree((small_fp32_index() if fp32 else small_index()).dir, dest)
    return dest
