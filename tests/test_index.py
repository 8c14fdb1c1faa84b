"""The on-disk index: real bm25s + FAISS + the embedded model on a few built-in topics."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rag.errors import IndexMismatch, IndexNotFound, InputError
from rag.index.build import build_index
from rag.index.store import Index, fingerprint
from tests.retrieval_support import copy_index, settings, small_chunks, small_index


def test_index_folder_layout_and_manifest():
    index = small_index()
    names = sorted(p.name for p in index.dir.iterdir())
    assert names == ["bm25", "chunks.jsonl", "dense.faiss", "embeddings.npy", "manifest.json", "windows.faiss",
                     "windows.npy"]
    m = json.loads((index.dir / "manifest.json").read_text())
    assert m["windows"]["tokens"] == 64 and m["windows"]["stride"] == 32
    assert m["windows"]["count"] == index.windows[0].ntotal >= len(index.chunks)
    assert m == index.manifest
    assert m["sieve_version"] and m["built_at"] and m["build_seconds"] > 0
    assert m["embedding"]["model"] == "default" and m["embedding"]["dim"] == 384
    assert Path(m["embedding"]["path"], "modules.json").is_file()
    assert m["chunker"] == {"prechunked": False, "size": 600, "overlap": 80}
    assert m["counts"]["chunks"] == len(small_chunks()) == len(index.chunks)
    assert m["corpus"]["fingerprint"] == index.fingerprint == fingerprint(small_chunks())
    assert m["faiss"]["type"] == "IndexFlatIP"
    # no temporary folders left beside the index
    assert [p.name for p in index.dir.parent.iterdir() if p.name.startswith(".")] == []


def test_load_round_trip():
    index = small_index()
    again = Index.load(index.dir, settings())
    assert [c.id for c in again.chunks] == [c.id for c in small_chunks()]
    assert again.chunks == list(small_chunks())
    assert set(again.by_id) == {c.id for c in small_chunks()}
    assert again.faiss.ntotal == len(again.chunks)
    norms = np.linalg.norm(np.asarray(again.embeddings), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-4)


def test_no_index_is_a_clear_error(tmp_path: Path):
    with pytest.raises(IndexNotFound, match=r"No index at .*nothing-here\. Build one with: rag index"):
        Index.load(tmp_path / "nothing-here", settings())


def test_other_embedding_model_is_a_mismatch():
    with pytest.raises(IndexMismatch, match=r"built with embedding model 'default'.*Rebuild it with: rag index --embedding-model"):
        Index.load(small_index().dir, settings(embedding_model="sentence-transformers/all-mpnet-base-v2"))


@pytest.mark.parametrize("damage", ["delete-faiss", "truncate-faiss", "bad-manifest", "drop-chunk-line", "delete-bm25"])
def test_corrupt_or_missing_files_are_a_mismatch(tmp_path: Path, damage: str):
    root = copy_index(tmp_path / "idx")
    if damage == "delete-faiss":
        (root / "dense.faiss").unlink()
    elif damage == "truncate-faiss":
        data = (root / "dense.faiss").read_bytes()
        (root / "dense.faiss").write_bytes(data[: len(data) // 3])
    elif damage == "bad-manifest":
        (root / "manifest.json").write_text("{not json", encoding="utf-8")
    elif damage == "drop-chunk-line":
        lines = (root / "chunks.jsonl").read_text().splitlines()
        (root / "chunks.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    elif damage == "delete-bm25":
        shutil.rmtree(root / "bm25")
    with pytest.raises(IndexMismatch, match=r"Rebuild it with: rag index.*--index-dir"):
        index = Index.load(root, settings())
        index.bm25, index.faiss  # read on first use


def test_reindex_reuses_unchanged_embeddings(tmp_path: Path):
    root = copy_index(tmp_path / "idx")
    chunks = list(small_chunks())
    chunks[0] = replace(chunks[0], text=chunks[0].text + "\nAn extra sentence changes this chunk.")
    rebuilt = build_index(chunks, root, settings(), show_progress=False)
    assert rebuilt.manifest["counts"]["embeddings_reused"] == len(chunks) - 1
    old = np.asarray(small_index().embeddings)
    new = np.asarray(rebuilt.embeddings)
    assert np.array_equal(old[1:], new[1:])
    assert not np.allclose(old[0], new[0])
    assert rebuilt.fingerprint != small_index().fingerprint


def test_failed_build_leaves_previous_index_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import faiss

    root = copy_index(tmp_path / "idx")
    before = (root / "manifest.json").read_text()

    def broken_write(*args, **kwargs):
        raise OSError("disk full (injected)")

    monkeypatch.setattr(faiss, "write_index", broken_write)
    with pytest.raises(OSError, match="injected"):
        build_index(list(small_chunks())[:5], root, settings(), show_progress=False)
    assert (root / "manifest.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # temp folder removed
    assert len(Index.load(root, settings()).chunks) == len(small_chunks())


def test_first_build_failure_leaves_nothing_that_looks_like_an_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import faiss

    monkeypatch.setattr(faiss, "write_index", lambda *a, **k: (_ for _ in ()).throw(OSError("injected")))
    with pytest.raises(OSError):
        build_index(list(small_chunks())[:3], tmp_path / "fresh", settings(), show_progress=False)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(IndexNotFound):
        Index.load(tmp_path / "fresh", settings())


def test_hnsw_above_threshold(tmp_path: Path):
    chunks = list(small_chunks())
    root = copy_index(tmp_path / "hnsw")  # rebuilding in place reuses the embeddings: only FAISS changes
    index = build_index(chunks, root, settings(), show_progress=False, hnsw_threshold=10)
    assert index.manifest["faiss"]["type"] == "IndexHNSWFlat"
    assert index.manifest["counts"]["embeddings_reused"] == len(chunks)
    flat = small_index()
    vector = np.asarray(flat.embeddings[3])
    assert index.dense_search(vector, 1)[0][0] == flat.dense_search(vector, 1)[0][0] == 3


def test_the_dense_index_setting_forces_hnsw_or_flat_at_any_size(tmp_path: Path):
    from rag.config import Settings
    from rag.errors import ConfigError

    chunks = list(small_chunks())
    root = copy_index(tmp_path / "forced")
    hnsw = build_index(chunks, root, settings().replace(dense_index="hnsw"), show_progress=False)
    assert hnsw.manifest["faiss"]["type"] == "IndexHNSWFlat"
    vector = np.asarray(hnsw.embeddings[3])
    assert hnsw.dense_search(vector, 1)[0][0] == 3
    flat = build_index(chunks, root, settings().replace(dense_index="flat"), show_progress=False, hnsw_threshold=10)
    assert flat.manifest["faiss"]["type"] == "IndexFlatIP"  # "flat" wins over a low threshold
    with pytest.raises(ConfigError, match="dense_index='ivf' is not allowed; use one of: auto, flat, hnsw"):
        Settings(dense_index="ivf").validate()


def test_bad_inputs(tmp_path: Path):
    with pytest.raises(InputError, match="nothing to index"):
        build_index([], tmp_path / "x", settings(), show_progress=False)
    dup = [small_chunks()[0], small_chunks()[0]]
    with pytest.raises(InputError, match="duplicate chunk id"):
        build_index(dup, tmp_path / "x", settings(), show_progress=False)
    (tmp_path / "not-an-index").mkdir()
    (tmp_path / "not-an-index" / "precious.txt").write_text("keep me")
    with pytest.raises(InputError, match="not a Sieve index"):
        build_index(list(small_chunks())[:2], tmp_path / "not-an-index", settings(), show_progress=False)
    assert (tmp_path / "not-an-index" / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-an-index"]
