"""Documents in: the built-in demo corpus and folders of text files.

Two sources produce :class:`Document` objects (a third, pre-chunked JSONL, skips documents
entirely; see :func:`rag.ingest.chunking.load_chunks_jsonl`):

* :func:`load_builtin_topics`: the Python language reference topics that ship with CPython
  (``pydoc_data.topics``), so a new user can index something without bringing data;
* :func:`load_folder`: ``.md`` / ``.markdown`` / ``.txt`` / ``.rst`` / ``.html`` / ``.pdf`` / ``.docx``
  files found recursively under a folder (symlinks are followed only to places inside it; see :func:`_walk`).
  Files that cannot be read as UTF-8 text, and folders that cannot be listed, are skipped with a warning naming
  them; HTML is turned into Markdown-like text (headings become ``#`` lines) so the
  structure-aware chunker sees its sections (one text or HTML file is read by :mod:`rag.ingest.textfile`).
  PDF and Word files are read by :mod:`rag.ingest.pdf` and :mod:`rag.ingest.word` into :class:`Block` s
  (headings with levels, paragraphs, whole tables), each with its page numbers, which the chunker uses
  directly; an encrypted, corrupt, empty or image-only one is skipped with a warning.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.errors import InputError
from rag.ingest.metadata import document_metadata
from rag.ingest.readers import Block
from rag.ingest.textfile import MAX_FILE_BYTES, _first_heading, _read_text, _valid_name, html_to_text

TEXT_SUFFIXES = (".md", ".markdown", ".txt", ".rst", ".html", ".htm")
PAGED_SUFFIXES = (".pdf", ".docx")  # read by rag.ingest.pdf and rag.ingest.word, page by page
SUFFIXES = (*TEXT_SUFFIXES, *PAGED_SUFFIXES)


@dataclass
class Document:
    """One source document before chunking. ``doc_id`` is stable (relative posix path or topic name).

    ``blocks``, when given (PDF, DOCX), is the document's structure: the chunker uses it instead of parsing
    ``text`` (then the blocks rendered as Markdown), and gives each chunk the pages its blocks are on."""

    doc_id: str
    text: str
    title: str = ""
    source: str = ""
    url: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    blocks: list[Block] = field(default_factory=list)


class Documents(list):
    """The documents :func:`load_folder` read (a list), with what it did not read: ``skipped`` (why -> how many
    files), ``skipped_folders`` (why -> how many folders, whose files were not seen) and ``not_followed`` ("file"
    or "folder" -> how many symlinks pointing outside the indexed folder)."""

    def __init__(self, docs: list[Document] = (), skipped: Counter[str] | None = None,
                 skipped_folders: Counter[str] | None = None, not_followed: Counter[str] | None = None) -> None:
        super().__init__(docs)
        self.skipped: Counter[str] = Counter(skipped or {})
        self.skipped_folders: Counter[str] = Counter(skipped_folders or {})
        self.not_followed: Counter[str] = Counter(not_followed or {})

    def skipped_summary(self) -> str:
        """``"skipped 3 files: 2 encrypted, 1 image-only"`` (then ``"; skipped 1 folder: 1 unreadable"`` and
        ``"; did not follow 2 symlinks to outside the folder: 1 to a file, 1 to a folder"`` when there are such), or ""."""
        return _summary(self.skipped, self.skipped_folders, self.not_followed)


def _summary(files: Counter[str], folders: Counter[str], links: Counter[str]) -> str:
    """The parts of :meth:`Documents.skipped_summary` that are not empty, joined by "; "."""
    parts = []
    for what, counts in (("file", files), ("folder", folders)):
        if n := sum(counts.values()):
            parts.append(f"skipped {n} {what}{'s' if n != 1 else ''}: " +
                         ", ".join(f"{k} {why}" for why, k in counts.most_common()))
    if n := sum(links.values()):
        parts.append(f"did not follow {n} symlink{'s' if n != 1 else ''} to outside the folder: " +
                     ", ".join(f"{k} to {'a ' + kind if k == 1 else kind + 's'}" for kind, k in links.most_common()))
    return "; ".join(parts)


def load_builtin_topics(names: list[str] | None = None) -> Documents:
    """The CPython language-reference topics (``pydoc_data.topics.topics``), one document per topic.

    ``names`` restricts to a subset (unknown names raise :class:`InputError`); the default is all.
    """
    from pydoc_data.topics import topics

    chosen = sorted(topics) if names is None else list(names)
    unknown = [n for n in chosen if n not in topics]
    if unknown:
        raise InputError(f"unknown built-in topic(s): {', '.join(unknown)}; see pydoc_data.topics for the list")
    docs = []
    for name in chosen:
        text = topics[name]
        first = text.lstrip().splitlines()[0].strip() if text.strip() else name
        docs.append(Document(doc_id=name, text=text, title=first, source=f"pydoc:{name}", meta={"topic": name}))
    return Documents(docs)


def load_folder(path: str | Path, show_progress: bool = True, max_bytes: int = MAX_FILE_BYTES) -> Documents:
    """Every supported file under ``path`` (recursive, sorted, hidden files and Office lock files ``~$*``
    skipped), as :class:`Documents` (a list, with the skipped files and folders and the symlinks not followed
    counted by reason). Which folders and symlinks are walked is :func:`_walk`'s rule.

    ``doc_id`` is the path relative to ``path`` in posix form (it may contain spaces); a file name that is
    not valid UTF-8 is kept with its bad bytes written as ``\\xNN`` (and a warning). Empty, binary,
    non-UTF-8, unreadable files and files over ``max_bytes`` (setting ``max_file_mb``) are skipped with a
    :class:`UserWarning` naming them; so are encrypted, corrupt, empty and image-only PDF/DOCX files (for
    those ``max_bytes`` bounds the text they hold, not the file's size: they are read page by page), and
    files whose path is longer than the system allows (``PATH_MAX``).
    Raises :class:`InputError` when ``path`` is missing or holds no usable supported file, saying why each
    was skipped.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise InputError(f"{root}: no such file or folder; give a folder of {'/'.join(SUFFIXES)} files")
    if root.is_file() and root.suffix.lower() not in SUFFIXES:
        raise InputError(f"{root}: unsupported file type {root.suffix!r}; supported: {', '.join(SUFFIXES)}")
    skipped: Counter[str] = Counter()
    folders: Counter[str] = Counter()
    links: Counter[str] = Counter()
    files = [root] if root.is_file() else _walk(root, skipped, folders, links)
    base = root.parent if root.is_file() else root
    if not files:
        missed = _summary(skipped, folders, links)
        raise InputError(f"{root}: no supported files found (looked for {', '.join(SUFFIXES)}, recursively"
                         + (f"; {missed}; see the warnings above)" if missed else ")"))
    docs: list[Document] = []
    for i, file in enumerate(files, 1):
        if show_progress:
            print(f"\rreading files {i}/{len(files)}", end="", file=sys.stderr, flush=True)
        shown = _valid_name(str(file))
        if shown != str(file):
            warnings.warn(f"file name {shown} is not valid UTF-8; it is indexed under that name (rename it, e.g. "
                          "with convmv, for a readable id)", stacklevel=2)
        rel = _valid_name(file.relative_to(base).as_posix())
        if file.suffix.lower() in PAGED_SUFFIXES:
            doc, why = _read_paged(file, rel, shown, max_bytes)
            if doc is None:
                skipped[why] += 1
            else:
                docs.append(doc)
            continue
        text, why = _read_text(file, max_bytes, shown)
        if text is not None and not text.strip():
            text, why = None, "empty"
            warnings.warn(f"skipping {shown}: empty", stacklevel=2)
        if text is None:
            skipped[why] += 1
            continue
        if file.suffix.lower() in (".html", ".htm"):
            title, text = html_to_text(text)
        else:
            title = _first_heading(text, file.suffix.lower()) or _valid_name(file.stem)
        if not text.strip():
            warnings.warn(f"skipping {shown}: empty after reading", stacklevel=2)
            skipped["empty"] += 1
            continue
        docs.append(Document(doc_id=rel, text=text, title=title or _valid_name(file.stem), source=shown,
                             meta={**document_metadata(text, rel), "path": rel}))
    if show_progress:
        print(file=sys.stderr)
    if not docs:
        reasons = ", ".join(f"{n} {why}" for why, n in skipped.most_common())
        more = _summary(Counter(), folders, links)
        raise InputError(f"{root}: none of the {len(files)} supported file(s) could be indexed ({reasons}"
                         f"{'; ' + more if more else ''}; see the warnings above)")
    return Documents(docs, skipped, folders, links)


def _walk(root: Path, skipped: Counter[str], folders: Counter[str], links: Counter[str]) -> list[Path]:
    """The supported files under the folder ``root``, sorted; what it cannot or will not read is warned about
    (one line naming it) and counted: files in ``skipped``, folders in ``folders``, symlinks in ``links``.

    Names starting with ``.`` (files and folders) and Office lock files ``~$*`` are left out. A folder that
    cannot be listed (no permission, or a path longer than ``PATH_MAX``) is skipped and counted, as is a file
    whose path is too long to open.

    Symlinks: one whose target is inside ``root`` is followed (a file or a whole folder, indexed under the
    link's own path), unless that target is read anyway: each folder is walked once (folders reached through
    a link after all real ones), and a linked file that is also found by its own path, or through another
    link, is read once. One pointing outside ``root`` (after resolving every link) is not followed, whether to
    a file or a folder: it is warned about and counted, so a link cannot pull in a folder the user did not
    give. A symlink loop, a dangling link, a FIFO or a device is not a document and is passed over silently.
    """
    limit = _path_max(root)
    inside = Path(os.path.realpath(root))
    seen: set[tuple[int, int]] = set()
    found: list[tuple[Path, bool]] = []  # (path, reached through a symlink)
    linked_dirs: list[Path] = []

    def walk(top: Path, via_link: bool) -> None:
        stack = [top]
        while stack:
            folder = stack.pop()
            try:
                st = folder.stat()
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name, reverse=True)
            except OSError as exc:
                _skip_folder(folder, exc, limit, folders)
                continue
            for entry in entries:
                path = Path(entry.path)
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_symlink():
                        kind = _link_kind(path, inside, links)
                        if kind == "folder":
                            linked_dirs.append(path)
                        elif kind == "file" and _supported(entry.name):
                            found.append((path, True))
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append(path)
                    elif entry.is_file(follow_symlinks=False) and _supported(entry.name):
                        found.append((path, via_link))
                except OSError as exc:
                    _skip_folder(path, exc, limit, folders)

    walk(root, False)
    while linked_dirs:  # after every real folder, so a folder is walked under its own path when it has one
        walk(linked_dirs.pop(0), True)
    files, keys, any_link = [], set(), any(linked for _, linked in found)
    for path, via_link in sorted(found, key=lambda f: (f[1], f[0])):  # real paths first
        if len(os.fsencode(path)) >= limit:
            warnings.warn(f"skipping {_shorten(path)}: its path is {len(os.fsencode(path))} bytes, over the "
                          f"system's limit of {limit} (move the file to a shallower folder)", stacklevel=3)
            skipped["path too long"] += 1
            continue
        if any_link:
            key = _identity(path)
            if via_link and key in keys:
                continue  # the same file, read under another path
            keys.add(key)
        files.append(path)
    return sorted(files)


def _supported(name: str) -> bool:
    return Path(name).suffix.lower() in SUFFIXES and not name.startswith("~$")


def _path_max(root: Path) -> int:
    """The longest path (bytes, with its NUL) the system opens: ``PATH_MAX``, 4096 on Linux."""
    try:
        return os.pathconf(root, "PC_PATH_MAX")
    except (OSError, ValueError):
        return 4096


def _identity(path: Path) -> tuple[int, int] | Path:
    """(device, inode) of the file ``path`` leads to, or ``path`` itself if it cannot be stat-ed."""
    try:
        st = path.stat()
        return (st.st_dev, st.st_ino)
    except OSError:
        return path


def _shorten(path: Path) -> str:
    """``path`` for a one-line message: a very long one keeps its first 120 and last 80 characters."""
    shown = _valid_name(str(path))
    return shown if len(shown) <= 240 else f"{shown[:120]}...{shown[-80:]}"


def _skip_folder(folder: Path, exc: OSError, limit: int, folders: Counter[str]) -> None:
    """Warn that ``folder`` cannot be listed (its files are not seen) and count it by why."""
    shown = _shorten(folder)
    if exc.errno == errno.ENAMETOOLONG:
        n = len(os.fsencode(folder))
        warnings.warn(f"skipping folder {shown}: its path is {n} bytes, over the system's limit of {limit}, so the "
                      "files in it are not indexed (move them to a shallower folder)", stacklevel=5)
        folders["path too long"] += 1
    else:
        warnings.warn(f"skipping folder {shown}: cannot read it ({exc.strerror or exc}), so the files in it are not "
                      "indexed (make it readable, e.g. chmod u+rx, to index them)", stacklevel=5)
        folders["unreadable"] += 1


def _link_kind(link: Path, inside: Path, links: Counter[str]) -> str | None:
    """"file" or "folder" for a symlink to be followed; None for one to a place outside ``inside`` (warned
    about and counted in ``links``) and for a loop, a dangling link or a link to a FIFO or device (silently)."""
    try:
        st = link.stat()
    except OSError:
        return None
    kind = "folder" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else None
    if kind is None or (kind == "file" and not _supported(link.name)):
        return None
    target = Path(os.path.realpath(link))
    if target == inside or inside in target.parents:
        return kind
    shown = _shorten(link)
    warnings.warn(f"not following {shown}: a symlink to the {kind} {_shorten(target)}, outside {_shorten(inside)} "
                  f"(index that {kind} itself, or put a copy of it inside)", stacklevel=5)
    links[kind] += 1
    return None


def _read_paged(file: Path, rel: str, shown: str, max_bytes: int) -> tuple[Document | None, str]:
    """(Document, "") for a PDF or DOCX, or (None, why) with a one-line warning naming the file. Never raises
    for a bad file: whatever its parser throws skips that file only."""
    from rag.ingest.pdf import read_pdf
    from rag.ingest.readers import Unreadable
    from rag.ingest.word import read_docx

    reader = read_pdf if file.suffix.lower() == ".pdf" else read_docx
    try:
        parsed = reader(file, max_bytes)
    except Unreadable as exc:
        warnings.warn(f"skipping {shown}: {exc.detail}", stacklevel=3)
        return None, exc.reason
    except OSError as exc:
        warnings.warn(f"skipping {shown}: cannot read it ({exc.strerror or exc})", stacklevel=3)
        return None, "unreadable"
    except Exception as exc:  # noqa: BLE001 - a parser failing on an odd file must not end the whole index
        detail = " ".join(str(exc).split())[:120]
        warnings.warn(f"skipping {shown}: cannot be parsed ({type(exc).__name__}: {detail})", stacklevel=3)
        return None, "corrupt"
    for note in parsed.notes:
        warnings.warn(f"{shown}: {note}", stacklevel=3)
    title = parsed.title or _valid_name(file.stem)
    text = "\n\n".join(b.markdown() for b in parsed.blocks)
    return Document(doc_id=rel, text=text, title=title, source=shown, meta={**document_metadata(text, rel), "path": rel},
                    blocks=parsed.blocks), ""
