"""Failure catalogue, reading documents (issue 38, items 4, 15, 17 and 18): paths longer than ``PATH_MAX``,
unreadable folders, NUL bytes past the start of a file, and symlinks to outside the indexed folder.

Each case runs the real ``rag index`` (tests/catalogue_support.run_cli) on real files and folders and asserts what
every catalogue case asserts (exit code, a one-line message naming the file and the fix, no traceback, no user
file changed), and that ``rag index``'s last line counts what was skipped or not followed. The checksums walk
folders by file descriptor (``os.fwalk``), so a tree deeper than ``PATH_MAX`` is checked too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.catalogue_support import Outcome, check, files, indexed, run_cli, says_in_stdout

OK = {"ok.md": "# Ok\n\nfine text\n"}
DEEP = 900  # nested folders: about 4,500 bytes of path, over Linux's PATH_MAX of 4096


def fd_checksums(root: Path, skip: str = "idx") -> dict[str, str]:
    """sha256 of every file under ``root`` (symlinks by their target), opened relative to its folder's file
    descriptor so that no path is too long; the top-level folder ``skip`` (the index being written) is left out."""
    found = {}
    for folder, dirs, names, fd in os.fwalk(root):
        if folder == str(root) and skip in dirs:
            dirs.remove(skip)
        for name in dirs:  # a symlink to a folder is listed here, not followed
            try:
                found[os.path.join(folder, name)] = "-> " + os.readlink(name, dir_fd=fd)
            except OSError:  # a real folder
                pass
        for name in names:
            key = os.path.join(folder, name)
            try:
                found[key] = "-> " + os.readlink(name, dir_fd=fd)
                continue
            except OSError:  # not a symlink
                pass
            try:
                handle = os.open(name, os.O_RDONLY | os.O_NONBLOCK, dir_fd=fd)
            except OSError as exc:  # a FIFO opened non-blocking is fine; anything else is recorded as it is
                found[key] = f"unopenable {exc.errno}"
                continue
            with os.fdopen(handle, "rb") as fh:
                found[key] = hashlib.sha256(fh.read()).hexdigest()
    return found


def nested(depth: int, name: str, text: str, folder: str = "dddd") -> Callable[[Path], None]:
    """u/docs/ok.md, and ``name`` under ``depth`` nested folders of u/docs, made through folder descriptors
    (a path that long cannot be given to mkdir)."""
    def setup(u: Path) -> None:
        files(**OK)(u)
        fd = os.open(u / "docs", os.O_RDONLY)
        try:
            for _ in range(depth):
                os.mkdir(folder, dir_fd=fd)
                fd, old = os.open(folder, os.O_RDONLY, dir_fd=fd), fd
                os.close(old)
            out = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(out, text.encode("utf-8"))
            os.close(out)
        finally:
            os.close(fd)
    return setup


def deep_file(u: Path) -> None:
    """A file whose folder's path fits in PATH_MAX but whose own path does not (a long name near the limit)."""
    depth = (3900 - len(os.fsencode(u / "docs"))) // 5
    nested(depth, "n" * 240 + ".md", "# Far\n\ntoo deep to open\n")(u)


def links(**named: str) -> Callable[[Path], None]:
    """u/docs/ok.md, u/elsewhere/{secret.md, notes/n.md}, u/docs/.drafts/d.md, then symlinks under u/docs:
    name -> target, relative to the link's folder (``__`` in a name stands for ``/``)."""
    def setup(u: Path) -> None:
        files(**OK, **{".drafts__d.md": "# Draft\n\na draft kept in a hidden folder\n"})(u)
        (u / "elsewhere" / "notes").mkdir(parents=True)
        (u / "elsewhere" / "secret.md").write_text("# Secret\n\nnot for this index\n", encoding="utf-8")
        (u / "elsewhere" / "notes" / "n.md").write_text("# Notes\n\nnot for this index either\n", encoding="utf-8")
        for name, target in named.items():
            link = u / "docs" / name.replace("__", "/")
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, link)
    return setup


def doc_ids(*ids: str) -> Callable[[Path, Outcome], None]:
    def then(u: Path, res: Outcome) -> None:
        rows = [json.loads(line) for line in (u / "idx" / "chunks.jsonl").read_text(encoding="utf-8").splitlines()]
        assert sorted({r["meta"]["doc_id"] for r in rows}) == sorted(ids), rows
    return then


def all_of(*thens: Callable[[Path, Outcome], None]) -> Callable[[Path, Outcome], None]:
    def then(u: Path, res: Outcome) -> None:
        for one in thens:
            one(u, res)
    return then


@dataclass
class Case:
    name: str
    code: int
    says: str  # regex one message line must match; r"^(?!)" = no Warning or Error line at all
    setup: Callable[[Path], object]
    then: Callable[[Path, Outcome], None] | None = None
    env: dict[str, str] | None = None


INDEX = ("index", "{u}/docs", "--index-dir", "{u}/idx", "-q")
CASES = [
    # ---- item 4: paths longer than PATH_MAX
    Case("900 nested folders", 0,
         r"^Warning: skipping folder .*/docs/dddd/dddd.*\.\.\..*/dddd: its path is \d{4} bytes, over the system's "
         r"limit of 4096, so the files in it are not indexed \(move them to a shallower folder\)",
         nested(DEEP, "deep.md", "# Deep\n\nat the bottom\n"),
         all_of(indexed(1), says_in_stdout("; skipped 1 folder: 1 path too long (see the warnings above)"))),
    Case("a file whose path is longer than PATH_MAX", 0,
         r"^Warning: skipping .*/docs/dddd/dddd.*\.\.\.n+\.md: its path is \d{4} bytes, over the system's limit of 4096 \(move "
         r"the file to a shallower folder\)", deep_file,
         all_of(indexed(1), says_in_stdout("; skipped 1 file: 1 path too long (see the warnings above)"))),
    # ---- item 17: NUL bytes anywhere in the file, not only in its first 8 KB
    Case("NUL bytes after the first 8 KB", 0, r"^Warning: skipping .*/docs/late\.txt: binary content \(NUL bytes\)",
         files(**OK, **{"late.txt": "plain words " * 1000 + "\x00\x01\x02 binary tail"}),
         all_of(indexed(1), says_in_stdout("; skipped 1 file: 1 binary"))),
    Case("NUL bytes in a later 1 MB block", 0, r"^Warning: skipping .*/docs/late\.md: binary content \(NUL bytes\)",
         files(**OK, **{"late.md": b"# Late\n\n" + b"words " * 300_000 + b"\x00 tail"}),
         all_of(indexed(1), says_in_stdout("; skipped 1 file: 1 binary"))),
    # ---- item 18: symlinks are followed inside the folder only
    Case("a symlink to a file outside the folder", 0,
         r"^Warning: not following .*/docs/secret\.md: a symlink to the file .*/elsewhere/secret\.md, outside "
         r".*/docs \(index that file itself, or put a copy of it inside\)",
         links(**{"secret.md": "../elsewhere/secret.md"}),
         all_of(doc_ids("ok.md"), says_in_stdout("; did not follow 1 symlink to outside the folder: 1 to a file"))),
    Case("a symlink to a folder outside the folder", 0,
         r"^Warning: not following .*/docs/sub/notes: a symlink to the folder .*/elsewhere/notes, outside .*/docs",
         links(**{"sub__notes": "../../elsewhere/notes"}),
         all_of(doc_ids("ok.md"), says_in_stdout("; did not follow 1 symlink to outside the folder: 1 to a folder"))),
    Case("a symlink that leaves the folder through another one", 0,
         r"^Warning: not following .*/docs/alias\.md: a symlink to the file .*/elsewhere/secret\.md",
         links(**{"alias.md": "sub/hop.md", "sub__hop.md": "../../elsewhere/secret.md"}),
         all_of(doc_ids("ok.md"), says_in_stdout("; did not follow 2 symlinks to outside the folder: 2 to files"))),
    Case("symlinks inside the folder are followed, each file read once", 0, r"^(?!)",
         links(drafts=".drafts", **{"again.md": "ok.md", "self": ".", "sub__up": ".."}),
         all_of(doc_ids("ok.md", "drafts/d.md"), indexed(2))),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reading_documents(case: Case, user: Path):
    case.setup(user)
    before = fd_checksums(user)
    res = run_cli(*(a.format(u=user) for a in INDEX))
    if case.says == r"^(?!)":
        assert res.code == case.code and "Traceback" not in res.err, res.err[-2000:]
        assert not [line for line in res.lines if line.startswith(("Error", "Warning"))], res.err
    else:
        check(res, case.code, case.says)
    assert fd_checksums(user) == before
    if case.then:
        case.then(user, res)


# ---- item 15: an unreadable folder is warned about and counted, like an unreadable file
@contextlib.contextmanager
def locked(u: Path, **named: str) -> Iterator[None]:
    """u/docs with ``named`` files and u/docs/private/secret.md, private/ unreadable (mode 000) inside the block;
    skips the test for a user who reads such a folder anyway (root), and checks no file changed."""
    files(**named, **{"private__secret.md": "# Secret\n\nbehind a locked door\n"})(u)
    private = u / "docs" / "private"
    before = fd_checksums(u)
    private.chmod(0)
    try:
        try:
            os.listdir(private)
        except PermissionError:
            yield
        else:
            pytest.skip("this user reads folders of mode 000 (root); run as another user, or under "
                        "setpriv --bounding-set=-dac_override,-dac_read_search")
    finally:
        private.chmod(0o755)
    assert fd_checksums(u) == before


def test_unreadable_folder_is_warned_about_and_counted(user: Path):
    with locked(user, **OK):
        res = run_cli(*(a.format(u=user) for a in INDEX))
    check(res, 0, r"^Warning: skipping folder .*/docs/private: cannot read it \(Permission denied\), so the files in "
                  r"it are not indexed \(make it readable, e\.g\. chmod u\+rx, to index them\)")
    assert "Indexed 1 chunks" in res.out and "; skipped 1 folder: 1 unreadable (see the warnings above)" in res.out


def test_only_an_unreadable_folder_is_an_error_that_says_so(user: Path):
    with locked(user):
        res = run_cli(*(a.format(u=user) for a in INDEX))
    check(res, 1, r"^Error: .*/docs: no supported files found \(looked for .*, recursively; skipped 1 folder: 1 "
                  r"unreadable; see the warnings above\)")
    assert not (user / "idx").exists()
