"""One generation of an index folder, pinned by open file handles so a reader never mixes two builds.

A build (rag.index.build) writes a complete new folder and swaps it into place with renames, then deletes the
old one. A reader that opened ``chunks.jsonl`` of one build and, later, the bm25s or FAISS files by path could
read them from the next build: wrong passages with exit 0 when both corpora have as many chunks, or a spurious
"inconsistent" error when they differ. So :func:`pin` opens the folder and then *every* file in it (``bm25/``
included) through that folder's descriptor, and keeps the handles: on POSIX an open file stays readable after
it is renamed or deleted, so whatever is read later (the bm25s and FAISS parts, on first use) comes from the
same build as the chunks.

A generation counts as pinned only if the folder was still the live one (``root`` names it) after every file
was opened: a build never changes a live folder in place, it only renames it away before deleting it. If it
was swapped out meanwhile (some of its files may already be gone), the handles are dropped and the new live
folder is pinned instead.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable

import numpy as np

from rag.index.layout import BM25_DIR, lock_path

ATTEMPTS = 50  # swaps seen while pinning before giving up (each attempt takes well under a millisecond)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO someone left in the folder must not hang the reader
ABSENT_WAIT = 2.0  # seconds to wait for a folder that is missing while a build of it holds its lock


class Changing(Exception):
    """The folder was replaced ``ATTEMPTS`` times while being pinned (a build running in a tight loop)."""


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


class Generation:
    """The open files of one index folder: ``names`` (top-level entries), ``open(name)``, the parts as objects."""

    def __init__(self, root: Path, files: dict[str, IO[bytes]], dirs: set[str]) -> None:
        self.root = root
        self._files = files  # "chunks.jsonl", "bm25/params.index.json", ...
        self.names = {name.split("/")[0] for name in files} | dirs
        self._lock = threading.Lock()  # one handle per file: reads of one file must not interleave
        self._part_lock = threading.Lock()  # threads asking for a part at once: the first reads it, once
        self._parts: dict[str, Any] = {}

    def __copy__(self) -> "Generation":
        return self  # open files of one build, read-only: copies of an Index (DSPy deep-copies programs) share them

    def __deepcopy__(self, memo: dict) -> "Generation":
        return self

    def part(self, name: str, read: Callable[[], Any]) -> Any:
        """The part ``name`` (``bm25``, ``dense.faiss``) as ``read()`` makes it, read once; its handles are closed
        once it is read (they stay open after a failure, so asking again gives the same error)."""
        with self._part_lock:
            if name not in self._parts:
                self._parts[name] = read()
                self.release(name)
            return self._parts[name]

    def has(self, name: str) -> bool:
        return name in self._files

    def read_bytes(self, name: str) -> bytes:
        with self._lock:
            f = self._files[name]
            f.seek(0)
            return f.read()

    def read_text(self, name: str) -> str:
        return self.read_bytes(name).decode("utf-8")

    def memmap_npy(self, name: str) -> np.ndarray:
        """A ``.npy`` file memory-mapped read-only through its handle (np.load cannot map a file object)."""
        with self._lock:
            f = self._files[name]
            f.seek(0)
            fmt = np.lib.format
            version = fmt.read_magic(f)
            header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran, dtype = header(f)
            if dtype.hasobject:
                raise ValueError(f"{name} holds Python objects")
            if not int(np.prod(shape)):
                return np.zeros(shape, dtype=dtype)
            return np.memmap(f, dtype=dtype, mode="r", offset=f.tell(), shape=shape, order="F" if fortran else "C")

    def load_npy(self, name: str) -> np.ndarray:
        with self._lock:
            f = self._files[name]
            f.seek(0)
            return np.load(f, allow_pickle=False)

    def faiss(self, name: str) -> Any:
        """The FAISS index in ``name``, streamed from its handle."""
        import faiss

        with self._lock:
            f = self._files[name]
            f.seek(0)
            return faiss.read_index(faiss.PyCallbackIOReader(f.read))

    def bm25(self) -> Any:
        """The bm25s index in ``bm25/``, read from the pinned handles as ``bm25s.BM25.load(dir, mmap=False)`` reads
        it from a folder (tests/test_catalogue_index.py checks the two agree)."""
        import bm25s

        params = json.loads(self.read_text(f"{BM25_DIR}/params.index.json"))
        vocab = json.loads(self.read_text(f"{BM25_DIR}/vocab.index.json"))
        version = params.pop("version", None)
        num_docs = params.pop("num_docs", None)
        bm25 = bm25s.BM25(**params)
        bm25.vocab_dict = vocab
        bm25._original_version = version  # noqa: SLF001 - as bm25s.BM25.load sets it
        bm25.unique_token_ids_set = set(vocab.values())
        bm25.scores = {part: self.load_npy(f"{BM25_DIR}/{part}.csc.index.npy") for part in ("data", "indices", "indptr")}
        bm25.scores["num_docs"] = num_docs
        nnoc = f"{BM25_DIR}/nonoccurrence_array.index.npy"
        if bm25.method in bm25.methods_requiring_nonoccurrence:
            bm25.nonoccurrence_array = self.load_npy(nnoc)
        else:
            bm25.nonoccurrence_array = None
        return bm25

    def release(self, *names: str) -> None:
        """Close the handles of ``names`` (a part read into memory needs them no more); all when none given."""
        with self._lock:
            for name in [n for n in self._files if not names or n in names or n.split("/")[0] in names]:
                self._files.pop(name).close()

    def __del__(self) -> None:
        for f in getattr(self, "_files", {}).values():
            f.close()


def _open_all(dfd: int) -> tuple[dict[str, IO[bytes]], set[str]]:
    """Every regular file of the folder ``dfd`` and of its ``bm25/``, opened through ``dfd``; the names of its folders."""
    files: dict[str, IO[bytes]] = {}
    dirs: set[str] = set()
    subfds = []
    try:
        for name in os.listdir(dfd):
            fd = os.open(name, os.O_RDONLY | NONBLOCK, dir_fd=dfd)
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                dirs.add(name)
                subfds.append(fd)
                if name != BM25_DIR:  # not part of the layout: named (a build refuses it), not read
                    continue
                for sub in os.listdir(fd):
                    subfd = os.open(sub, os.O_RDONLY | NONBLOCK, dir_fd=fd)
                    if stat.S_ISREG(os.fstat(subfd).st_mode):
                        files[f"{name}/{sub}"] = os.fdopen(subfd, "rb")
                    else:
                        os.close(subfd)
            elif stat.S_ISREG(mode):
                files[name] = os.fdopen(fd, "rb")
            else:
                os.close(fd)
    except BaseException:
        for f in files.values():
            f.close()
        raise
    finally:
        for fd in subfds:
            os.close(fd)
    return files, dirs


def pin(root: Path) -> Generation | None:
    """The open files of the live folder ``root`` (None: there is no folder there, nor a build making one)."""
    root = Path(root)
    deadline = None
    for _ in range(ATTEMPTS):
        try:
            dfd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except (FileNotFoundError, NotADirectoryError):
            # between a build's two renames the folder is briefly absent: wait while its build lock exists
            if not lock_path(root).exists():
                if root.is_dir():  # the build put it in place and let go of its lock since the open: open it now
                    continue
                return None
            deadline = deadline or time.monotonic() + ABSENT_WAIT
            if time.monotonic() > deadline:
                return None
            time.sleep(0.005)
            continue
        files: dict[str, IO[bytes]] = {}
        try:
            pinned = _identity(os.fstat(dfd))
            try:
                files, dirs = _open_all(dfd)
            except OSError:
                files, dirs = {}, set()
                if _live(root, pinned):
                    raise
                continue  # swapped out (and partly deleted) while being opened: pin the new one
            if _live(root, pinned):
                return Generation(root, files, dirs)
            for f in files.values():
                f.close()
        finally:
            os.close(dfd)
    raise Changing(f"{root} was replaced {ATTEMPTS} times while being opened")


def _live(root: Path, pinned: tuple[int, int]) -> bool:
    try:
        return _identity(os.stat(root)) == pinned
    except OSError:
        return False
