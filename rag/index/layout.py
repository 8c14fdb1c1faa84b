"""The index folder: its layout, which folders a build may replace, and one build per folder at a time.

A build writes into a temporary sibling folder and then swaps it into place (rag.index.build), which deletes
what was there. So a build only replaces a folder that is provably a Sieve index:

* every entry in it belongs to the index layout (manifest.json, chunks.jsonl, bm25/, dense.faiss,
  embeddings.npy, and tables.duckdb when the index has tables: optional, so an index without tables is complete), and
* its manifest.json is a Sieve index manifest (an integer ``format`` and a ``sieve_version``), or, for a
  damaged index whose manifest is missing or unreadable, at least two of the other parts are there.

Anything else (a web app's folder with its own manifest.json, a copy of a compiled artifact, notes) is
refused with one line naming the folder and what in it is not an index, before any embedding is done.

Two builds into one folder would race on the swap; :func:`build_lock` makes the second one stop at once
with "another build is running" (an ``flock`` on ``.<name>.lock`` beside the folder, released by the
kernel if the process dies, and removed when the build ends, also on SIGTERM: :func:`terminate_as_interrupt`).
A symbolic link to an index folder is rebuilt where it points, and the link stays (:func:`build_target`); the
current folder, where the shell would be left in a deleted folder by the swap, is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX (Windows): builds are not locked
    fcntl = None  # type: ignore[assignment]

from rag.errors import InputError

MANIFEST = "manifest.json"
CHUNKS = "chunks.jsonl"
BM25_DIR = "bm25"
FAISS_FILE = "dense.faiss"
EMBEDDINGS = "embeddings.npy"
TABLES = "tables.duckdb"  # the tables beside the documents (rag.data.tableset), only in an index built with some
REQUIRED = (CHUNKS, BM25_DIR, FAISS_FILE, EMBEDDINGS)
WINDOWS_FAISS = "windows.faiss"  # dense vectors of passage windows (rag.index.windows), in an index built with them
WINDOW_OWNERS = "windows.npy"  # the chunk row of each window vector
OPTIONAL = (TABLES, WINDOWS_FAISS, WINDOW_OWNERS)
LAYOUT = (MANIFEST, *REQUIRED, *OPTIONAL)


def _manifest_kind(path: Path) -> str:
    """``sieve``, ``missing``, ``unreadable`` (not JSON: a damaged index) or ``foreign`` (someone else's)."""
    if not path.exists():
        return "missing"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "unreadable"
    if isinstance(data, dict) and isinstance(data.get("format"), int) and isinstance(data.get("sieve_version"), str):
        return "sieve"
    return "foreign"


def replace_refusal(root: Path) -> str | None:
    """Why a build must not write to ``root`` (None: it may, the folder is absent, empty or a Sieve index)."""
    root = Path(root)
    if not root.exists():
        if root.is_symlink():
            return f"{root} is a broken symbolic link"
        return None
    if not root.is_dir():
        return f"{root} exists and is not a folder"
    try:
        entries = sorted(p.name for p in root.iterdir())
    except OSError as exc:
        return f"{root} cannot be read ({exc.strerror or exc})"
    if not entries:
        return None
    foreign = [name + ("/" if (root / name).is_dir() else "") for name in entries if name not in LAYOUT]
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        return f"{root} is not a Sieve index: it holds {', '.join(foreign[:3])}{more}"
    kind = _manifest_kind(root / MANIFEST)
    if kind == "foreign":
        return f"{root} is not a Sieve index: its {MANIFEST} is not a Sieve index manifest (no format/sieve_version)"
    if kind != "sieve" and sum((root / name).exists() for name in REQUIRED) < 2:
        return f"{root} is not a Sieve index: its {MANIFEST} is {kind} and it lacks the index files"
    return None


def build_target(root: Path) -> Path:
    """The folder a build of ``root`` really writes: absolute, with symbolic links followed, so a linked
    ``--index-dir`` is rebuilt where it points (the link stays) and ``--index-dir .`` has a parent to build beside."""
    return Path(os.path.realpath(Path(root).expanduser()))


def check_target(root: Path) -> None:
    """Raise InputError (one line, naming the folder) unless a build may write the index to ``root``."""
    root = Path(root)
    why = replace_refusal(root)
    if why:
        raise InputError(f"{why}; refusing to replace it. Choose another --index-dir, or empty that folder yourself")
    real = build_target(root)
    here = Path(os.path.realpath(os.getcwd()))
    if real == here or real in here.parents:  # the swap would leave the shell (and this process) in a deleted folder
        raise InputError(f"the index folder {real} is {'the' if real == here else 'above the'} current folder "
                         f"(--index-dir {root}{' or an empty SIEVE_INDEX_DIR' if str(root) == '.' else ''}); a build "
                         f"replaces that folder as a whole. Choose a folder of its own, e.g. --index-dir {here / 'index'}")
    parent = real.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"cannot create the index folder {root}: {parent} is not a folder; choose another --index-dir")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot write the index folder {root}: {parent} is not writable; choose another --index-dir")


def lock_path(root: Path) -> Path:
    """``.<name>.lock`` beside the folder (never inside it: ``root`` is made absolute first)."""
    root = Path(os.path.abspath(Path(root).expanduser()))
    return root.parent / f".{root.name}.lock"


@contextlib.contextmanager
def build_lock(root: Path) -> Iterator[Path]:
    """Hold the build lock of ``root`` (InputError at once when another build holds it); removed on exit."""
    path = lock_path(root)
    if fcntl is None:
        yield path
        return
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise InputError(f"another rag index is building {root} right now"
                             f"{f' (pid {holder})' if holder.isdigit() else ''}; wait for it to finish, "
                             f"or choose another --index-dir (lock: {path})") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:  # not a lock file that its previous holder removed while we waited to open it
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While a build runs, SIGTERM (``kill``, a closing terminal's supervisor, ``timeout``) raises
    KeyboardInterrupt as Ctrl-C does: the temporary folder is removed, the lock released, the old index kept,
    and the CLI says so in its ``Interrupted:`` line. Only in the main thread, and only where nobody else
    handles SIGTERM; the previous handling is restored afterwards."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
