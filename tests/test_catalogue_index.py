"""The failure catalogue, the index store (issue 38): reading an index while it is rebuilt, a symlinked
``--index-dir``, chunk fields that cannot be counted, a full disk, a read-only ``SIEVE_HOME``, an empty target
that is the working folder, and SIGTERM mid-build.

Each runs the real thing (the CLI in this process through tests/catalogue_support.run_cli, or real builds with
real bm25s and FAISS in another process) and asserts what the catalogue asserts: the exit code, one message line
naming the folder and the fix, no traceback, and nothing of the user's lost.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from rag.index.store import Index
from tests.catalogue_support import (
    Outcome,
    check,
    checksums,
    docs_folder,
    index_copy,
    not_embedded,
    run_cli,
    write_jsonl,
)
from tests.retrieval_support import settings, small_index

# ---------------------------------------------------------------- item 10: a search during a rebuild
WORDS = ["apple", "brass", "cedar", "delta", "ember", "fjord"]
DIM = 8


def corpus(tag: str) -> list[dict]:
    """Six chunks; corpus A holds word i in chunk i, corpus B in chunk 5 - i, so rows of one paired with chunks
    of the other put a chunk without the query's word at the top."""
    order = WORDS if tag == "a" else WORDS[::-1]
    return [{"id": f"{tag}{i}", "text": f"{tag} corpus chunk {i} about {word} and nothing else"}
            for i, word in enumerate(order)]


REBUILDER = textwrap.dedent("""
    import sys, time
    import numpy as np
    import rag.index.embeddings
    from rag.index.build import build_index
    from rag.ingest.chunking import Chunk
    from tests.test_catalogue_index import DIM, corpus, vectors
    from tests.retrieval_support import settings

    rag.index.embeddings.embedding_dim = lambda name=None: DIM  # given vectors: the model is never loaded
    root, seconds = sys.argv[1], float(sys.argv[2])
    corpora = {tag: [Chunk(id=r["id"], text=r["text"]) for r in corpus(tag)] for tag in "ab"}
    builds, end = 0, time.monotonic() + seconds
    while not builds or time.monotonic() < end:
        tag = "ab"[builds % 2]
        build_index(corpora[tag], root, settings(index_dir=root), show_progress=False, source="builtin",
                    embedder=lambda texts, tag=tag: vectors(tag, len(texts)))
        builds += 1
    print(builds)
""")


def vectors(tag: str, n: int) -> np.ndarray:
    """Distinct unit vectors per corpus (seeded), so FAISS of one corpus paired with the other's rows shows."""
    v = np.random.default_rng(1 if tag == "a" else 2).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def one_search(root: Path) -> tuple[str, bool]:
    """Load the index and search it both ways; returns (corpus tag, whether every part agreed with the chunks)."""
    index = Index.load(root, settings(index_dir=root))
    tag = index.chunks[0].id[0]
    ok = all(c.id[0] == tag for c in index.chunks)
    time.sleep(0.002)  # a search does other work between loading and its first bm25/FAISS read
    for word in WORDS:
        hits = index.bm25_search(index.bm25_query(word), 2)
        ok &= bool(hits) and word in index.chunks[hits[0][0]].text
    for row in range(len(index)):
        ok &= index.dense_search(np.asarray(index.embeddings[row]), 1)[0][0] == row
    ok &= np.allclose(np.asarray(index.embeddings), vectors(tag, len(index)))
    return tag, ok


def test_searches_during_rebuilds_see_one_whole_index(tmp_path: Path):
    root = tmp_path / "idx"
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo), "SIEVE_HOME": str(tmp_path / "home")}
    seed = subprocess.run([sys.executable, "-c", REBUILDER, str(root), "0"], env=env, cwd=repo, capture_output=True,
                          text=True, timeout=120)
    assert seed.returncode == 0, seed.stderr  # one build ("0" seconds still runs the loop once)
    writer = subprocess.Popen([sys.executable, "-c", REBUILDER, str(root), "12"], env=env, cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict[str, int] = {"a": 0, "b": 0}
    bad = []
    try:
        end = time.monotonic() + 60
        while writer.poll() is None and time.monotonic() < end:
            tag, ok = one_search(root)  # an IndexMismatch ("inconsistent", "corrupt") fails the test here
            seen[tag] += 1
            if not ok:
                bad.append(tag)
    finally:
        writer.kill() if writer.poll() is None else None
        out, err = writer.communicate(timeout=30)
    assert writer.returncode == 0, err[-3000:]
    assert int(out.split()[-1]) >= 6, out  # the index really was rebuilt, again and again
    assert seen["a"] and seen["b"], seen  # and the searches saw both corpora
    assert bad == [], f"{len(bad)} of {sum(seen.values())} searches mixed two builds"


def test_an_index_put_in_place_between_the_open_and_the_lock_check_is_opened(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    """The race the test above met once on a loaded machine: a search finds the folder absent (a build is between
    its two renames), and by the time it looks for the build's lock the build has finished and removed it. The
    folder is there again, so the search opens it rather than saying there is no index."""
    from tests.retrieval_support import copy_index

    root = copy_index(tmp_path / "idx")
    real_open, missed = os.open, []

    def open_once_missing(path, flags, *args, **kwargs):
        if Path(path) == root and not missed:  # the first open lands between the renames
            missed.append(path)
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_once_missing)
    index = Index.load(root, settings(index_dir=root))  # no lock file: the build that moved it has ended
    assert missed and len(index) > 0


def test_parts_read_later_come_from_the_build_that_was_loaded(tmp_path: Path):
    """The same race, made certain: the folder is replaced by another corpus's index (and the old one deleted)
    between loading and the first bm25 and FAISS reads; those still read the loaded build."""
    from rag.index.build import build_index
    from rag.ingest.chunking import Chunk
    from tests.retrieval_support import copy_index, small_chunks

    root = copy_index(tmp_path / "idx")
    index = Index.load(root, settings(index_dir=root))
    other = tmp_path / "other"
    build_index([Chunk(id=f"z{i}", text=f"zebra {i}") for i in range(len(small_chunks()))], other,
                settings(index_dir=other), show_progress=False)
    (tmp_path / "gone").mkdir()
    os.replace(root, tmp_path / "gone" / "idx")
    os.replace(other, root)
    import shutil

    shutil.rmtree(tmp_path / "gone")
    assert index.bm25.scores["num_docs"] == len(index)  # the loaded build's, not "inconsistent"
    top = index.bm25_search(index.bm25_query("assert statement"), 1)
    assert index.chunks[top[0][0]].id.startswith("assert")
    assert index.dense_search(np.asarray(index.embeddings[3]), 1)[0][0] == 3
    assert Index.load(root, settings(index_dir=root)).chunks[0].id == "z0"  # a new load sees the new build


def test_bm25_read_from_open_files_equals_bm25s_own_load():
    """rag.index.generation reads bm25/ as bm25s.BM25.load does; if a bm25s release changes its format, this fails."""
    import bm25s

    from tests.retrieval_support import small_index

    pinned = Index.load(small_index().dir, settings()).bm25
    theirs = bm25s.BM25.load(str(small_index().dir / "bm25"), mmap=False, show_progress=False)
    assert pinned.vocab_dict == theirs.vocab_dict
    assert (pinned.method, pinned.k1, pinned.b) == (theirs.method, theirs.k1, theirs.b)
    for key in ("data", "indices", "indptr"):
        assert np.array_equal(pinned.scores[key], theirs.scores[key])
    assert pinned.scores["num_docs"] == theirs.scores["num_docs"]
    ids = [theirs.vocab_dict[t] for t in ("assert", "loop", "function") if t in theirs.vocab_dict]
    assert ids and np.array_equal(pinned.get_scores(ids), theirs.get_scores(ids))



def test_a_loaded_index_is_deep_copied_and_read_by_threads_at_once():
    """DSPy deep-copies programs (and the Index of their retriever); eval threads may ask for a part together."""
    import copy
    from concurrent.futures import ThreadPoolExecutor

    from tests.retrieval_support import small_index

    index = Index.load(small_index().dir, settings())
    twin = copy.deepcopy(index)
    with ThreadPoolExecutor(8) as pool:
        parts = list(pool.map(lambda i: (index, twin)[i % 2].bm25 if i % 4 < 2 else (index, twin)[i % 2].faiss,
                              range(16)))
    assert all(p.scores["num_docs"] == len(index) for p in parts[0::4] + parts[1::4])
    assert all(p.ntotal == len(index) for p in parts[2::4] + parts[3::4])

# ---------------------------------------------------------------- the CLI cases
def test_a_symlinked_index_dir_is_rebuilt_where_it_points(user: Path):
    docs_folder(user)
    target = index_copy(user, "real-idx")
    os.symlink("real-idx", user / "idxlink")
    res = run_cli("index", user / "docs", "--index-dir", user / "idxlink", "-q")
    assert res.code == 0 and "Traceback" not in res.err, res.err
    assert "Indexed 2 chunks" in res.out and str(user / "idxlink") in res.out, res.out
    assert (user / "idxlink").is_symlink() and os.readlink(user / "idxlink") == "real-idx"  # the link is intact
    manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["corpus"]["source"] == f"folder:{user / 'docs'}"  # and its target rebuilt, not stale
    assert sorted(p.name for p in user.iterdir()) == ["docs", "idxlink", "real-idx"]  # no .idxlink.old-* left
    assert Index.load(user / "idxlink", settings(index_dir=user / "idxlink")).manifest == manifest


@pytest.mark.parametrize("doc_id", [["a", "b"], {"name": "a"}])
def test_chunks_with_a_doc_id_that_is_not_a_string(user: Path, doc_id: object):
    write_jsonl(user / "chunks.jsonl", [{"id": "a", "text": "Compose merges files.", "doc_id": "ok"},
                                        {"id": "b", "text": "More text.", "doc_id": doc_id}])
    before = checksums(user)
    res = run_cli("index", "--chunks", user / "chunks.jsonl", "--index-dir", user / "idx")
    check(res, 1, rf"^Error: .*/chunks\.jsonl:2: field 'doc_id' must be a string or a number, got "
                  rf"{type(doc_id).__name__}")
    not_embedded(user, res)
    assert checksums(user) == before and not (user / "idx").exists()


def test_a_chunk_with_a_doc_id_that_is_not_a_string_through_the_api(tmp_path: Path):
    from rag.errors import InputError
    from rag.index.build import build_index
    from rag.ingest.chunking import Chunk

    with pytest.raises(InputError, match=r"^chunk 'b': field 'doc_id' must be a string or a number, got dict$"):
        build_index([Chunk(id="a", text="x"), Chunk(id="b", text="y", meta={"doc_id": {"k": 1}})], tmp_path / "idx",
                    settings(index_dir=tmp_path / "idx"), show_progress=False,
                    embedder=lambda texts: pytest.fail("embedded before the check"))


def _short_write(fp, array, *args, **kwargs):
    """numpy's own failure on a full disk (np.save -> format.write_array -> ndarray.tofile): part of the file
    written, then "N requested and M written"."""
    fp.write(b"\x93NUMPY")
    raise OSError(f"{array.nbytes} requested and 0 written")


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _edquot(*args, **kwargs):
    raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))


@pytest.mark.parametrize("where", ["bm25 and vectors: numpy short write", "FAISS: ENOSPC", "FAISS: EDQUOT"])
def test_a_full_disk_during_a_build_keeps_the_old_index(user: Path, monkeypatch: pytest.MonkeyPatch, where: str):
    import faiss

    docs_folder(user)
    idx = index_copy(user)
    before = checksums(user)
    if where.startswith("bm25"):
        monkeypatch.setattr(np.lib.format, "write_array", _short_write)
    else:
        monkeypatch.setattr(faiss, "write_index", _enospc if "ENOSPC" in where else _edquot)
    res = run_cli("index", user / "docs", "--index-dir", idx, "-q")
    check(res, 1, r"^Error: the disk of .*/u is full: writing the new index failed, the index at .*/idx was not "
                  r"changed and the temporary build folder was removed\. The index needs about \d+\.\d MB; "
                  r"[\d.]+ [MG]B free there now; free some space")
    monkeypatch.undo()
    assert checksums(user) == before  # the old index, byte for byte
    assert sorted(p.name for p in user.iterdir()) == ["docs", "idx"]  # no temporary folder, no lock
    assert len(Index.load(idx, settings(index_dir=idx))) == len(small_index())


def test_a_first_build_on_a_full_disk_says_nothing_was_written(user: Path, monkeypatch: pytest.MonkeyPatch):
    import faiss

    docs_folder(user)
    monkeypatch.setattr(faiss, "write_index", _enospc)
    res = run_cli("index", user / "docs", "--index-dir", user / "idx", "-q")
    check(res, 1, r"^Error: the disk of .*/u is full: writing the new index failed, nothing was written to .*/idx")
    assert sorted(p.name for p in user.iterdir()) == ["docs"]


@pytest.mark.parametrize("command", ["search", "index"])
def test_a_read_only_sieve_home_that_needs_an_encoder_export(user: Path, monkeypatch: pytest.MonkeyPatch,
                                                             command: str):
    """SIEVE_HOME on a read-only file system (simulated where Python makes folders: root may write anywhere) and
    no ONNX encoder in it: one line naming the folder and SIEVE_HOME, before torch and the model are loaded."""
    from rag.index import embeddings

    docs_folder(user)
    idx = index_copy(user)
    home = user / "home"
    home.mkdir()
    monkeypatch.setenv("SIEVE_HOME", str(home))
    real_mkdir = os.mkdir

    def mkdir(path, *args, **kwargs):
        if Path(os.path.abspath(path)).is_relative_to(home):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    before, loads = checksums(user), embeddings.load_embedder.cache_info().misses
    args = (("search", "assert", "--mode", "dense") if command == "search" else ("index", user / "docs", "-q"))
    res = run_cli(*args, "--index-dir", idx)
    check(res, 1, rf"^Error: cannot write the ONNX encoder to {re.escape(str(home))}/encoders \(Read-only file "
                  r"system\); it is exported there once per model\. Set SIEVE_HOME to a writable folder")
    assert embeddings.load_embedder.cache_info().misses == loads  # refused before loading the model
    assert checksums(user) == before


@pytest.mark.parametrize("how", ["--index-dir .", "SIEVE_INDEX_DIR empty"])
def test_the_current_folder_as_index_dir_is_refused_before_embedding(user: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     how: str):
    docs_folder(user)
    (user / "here").mkdir()
    monkeypatch.chdir(user / "here")
    if how.startswith("SIEVE"):
        monkeypatch.setenv("SIEVE_INDEX_DIR", "")
        args: tuple = ()
    else:
        args = ("--index-dir", ".")
    res = run_cli("index", user / "docs", *args)
    check(res, 1, rf"^Error: the index folder {re.escape(str(user / 'here'))} is the current folder .*; a build "
                  r"replaces that folder as a whole\. Choose a folder of its own, e\.g\. --index-dir .*/here/index")
    not_embedded(user, res)
    assert list((user / "here").iterdir()) == [] and sorted(p.name for p in user.iterdir()) == ["docs", "here"]


SIGTERM_BUILD = textwrap.dedent("""
    import os, signal, sys
    import rag.index.build
    from rag.cli import main

    real = rag.index.build._encode

    def embed_then_sigterm(*args, **kwargs):
        vectors = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)  # what `kill PID` or `timeout` sends, while the build is under way
        return vectors

    rag.index.build._encode = embed_then_sigterm
    sys.argv = ["rag", "index", "docs", "--index-dir", "idx", "-q"]
    main()
""")


def test_sigterm_mid_index_is_handled_like_ctrl_c(user: Path):
    docs_folder(user)
    index_copy(user)
    before = checksums(user)
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo), "SIEVE_HOME": os.environ.get("SIEVE_HOME", str(user / "home"))}
    proc = subprocess.run([sys.executable, "-c", SIGTERM_BUILD], cwd=user, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-2000:])  # not -15: the signal was handled
    res = Outcome(proc.returncode, proc.stdout, proc.stderr)
    check(res, 130, r"^Interrupted: the index at .*idx was not changed .*run the same command again")
    assert checksums(user) == before
    assert sorted(p.name for p in user.iterdir()) == ["docs", "idx"]  # no temporary folder, no stale lock
