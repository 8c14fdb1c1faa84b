"""A full disk during a build: recognised, and reported in one line with what was kept and the space needed.

A build writes the new index into a temporary folder beside the old one (rag.index.build), so when the disk
fills up the old index is still whole; the temporary folder is removed. What a user needs then is not the
traceback of the write that failed (``OSError: [Errno 28] No space left on device``, numpy's short write
``1536 requested and 0 written``, FAISS's ``write error ... (No space left on device)``) but one line: which
folder, that the old index is kept, and roughly how much space the new one takes.
"""

from __future__ import annotations

import errno
import re
import shutil
from pathlib import Path

from rag.errors import InputError

FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
SHORT_WRITE = re.compile(r"\d+ requested and \d+ written|No space left on device|Disk quota exceeded")


def out_of_space(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that failed because the disk (or the user's quota) is full."""
    if isinstance(exc, OSError) and exc.errno in FULL:
        return True
    return isinstance(exc, (OSError, RuntimeError)) and bool(SHORT_WRITE.search(str(exc)))


def bytes_needed(chunks: int, dim: int, characters: int, hnsw: bool, windows: int = 0) -> int:
    """Rough size of an index: the vectors twice (embeddings.npy and FAISS; HNSW adds its graph), the window
    vectors and their owners, the chunk store and the bm25s matrices (both about the size of the text), plus a
    margin of a quarter."""
    vectors = chunks * dim * 4
    graph = chunks * 32 * 2 * 4 if hnsw else 0
    window_bytes = windows * (dim * 4 + 4 + (32 * 2 * 4 if hnsw else 0))
    return int(1.25 * (2 * vectors + graph + window_bytes + 3 * characters + 4096))


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n < 1e9 else f"{n / 1e9:.2f} GB"


def full_disk_error(root: Path, had_index: bool, need: int) -> InputError:
    """The one-line error for a build of ``root`` that ran out of space (the temporary folder already removed)."""
    try:
        free = f"; {_mb(shutil.disk_usage(root.parent).free)} free there now"
    except OSError:
        free = ""
    kept = (f"the index at {root} was not changed" if had_index else f"nothing was written to {root}")
    return InputError(f"the disk of {root.parent} is full: writing the new index failed, {kept} and the temporary "
                      f"build folder was removed. The index needs about {_mb(need)}{free}; free some space, or choose "
                      "an --index-dir on another disk, and run the same command again")
