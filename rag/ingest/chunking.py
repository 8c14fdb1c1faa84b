"""Documents -> chunks: structure-aware splitting, and pre-chunked JSONL.

:func:`chunk_documents` splits each document into blocks (Markdown ``#`` headings, Markdown
setext / reStructuredText underlined headings, fenced code, indented code/literal runs, tables and
paragraphs), then packs whole blocks into chunks of about ``size`` characters:

* a heading closes the current chunk once it holds at least ``size // 4`` characters, so tiny
  sections (a heading and one line) join their neighbour instead of becoming a fragment;
* code blocks and tables are kept whole when they fit in ``size``; longer ones are split at line
  boundaries (a Markdown table repeats its header rows in every piece);
* an over-long paragraph is split at sentence, then word boundaries;
* a chunk that continues the previous chunk's section starts with up to ``overlap`` characters of
  its tail (cut at a word boundary); no overlap is carried across a heading.

Each chunk's ``title`` is its heading path (``Doc title > Section > Subsection``): the common
prefix of the paths of the blocks it holds. Ids are ``<doc_id>#<NNN>`` (zero-padded, per document).

A document with ``blocks`` (PDF, DOCX: see rag.ingest.readers) is not parsed from its text: its blocks are
packed by the same rules, and each chunk's ``meta`` gets ``page`` (its first page) and, when it runs
onto later pages, ``page_end``, from the blocks it holds (:func:`page_label` writes "p. 12" / "pp. 12-13").

:func:`load_chunks_jsonl` reads chunks made elsewhere; their ids are kept verbatim.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from rag.errors import ConfigError, InputError
from rag.ingest.corpus import Document
from rag.ingest.jsonl import json_lines

TITLE_SEP = " > "


@dataclass
class Chunk:
    """One retrievable unit. ``id`` is unique in an index; ``title`` is the heading path."""

    id: str
    text: str
    title: str = ""
    source: str = ""
    url: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "title": self.title, "source": self.source, "url": self.url, "meta": self.meta}


@dataclass
class _Block:
    kind: str  # heading | code | table | para
    text: str
    path: tuple[str, ...]
    pages: tuple[int, int] | None = None  # (first, last) page, for documents that have pages (PDF, DOCX)


_MD_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_UNDERLINE = re.compile(r"^([=\-~^*#+\"'`:._])\1{2,}\s*$")
_TABLE_LINE = re.compile(r"^\s*(\|.*\||\+[-=+]+\+)\s*$")


def _split_blocks(text: str, doc_title: str) -> list[_Block]:
    """Parse ``text`` into blocks, each tagged with the heading path in force where it starts."""
    lines = text.replace("\r\n", "\n").split("\n")
    blocks: list[_Block] = []
    stack: list[tuple[int, str]] = []  # (level, heading)
    rst_levels: dict[str, int] = {}  # adornment style -> level, in order of first appearance
    para: list[str] = []

    def path() -> tuple[str, ...]:
        return _path(stack, doc_title)

    def flush_para() -> None:
        if para and any(line.strip() for line in para):
            body = "\n".join(para).strip("\n")
            indented = all(not line.strip() or line.startswith(("   ", "\t")) for line in para)
            kind = "table" if all(_TABLE_LINE.match(line) for line in para if line.strip()) else "code" if indented else "para"
            if kind == "code" and blocks and blocks[-1].kind == "code" and blocks[-1].path == path():
                blocks[-1].text += "\n\n" + body  # an indented run broken by blank lines stays one block
            else:
                blocks.append(_Block(kind, body, path()))
        para.clear()

    def push_heading(level: int, name: str, raw: str) -> None:
        flush_para()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, name))
        blocks.append(_Block("heading", raw, path()))

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush_para()
            marker = fence.group(1)
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith(marker):
                j += 1
            blocks.append(_Block("code", "\n".join(lines[i : j + 1]), path()))
            i = j + 1
            continue
        m = _MD_HEADING.match(line)
        if m and m.group(2):
            push_heading(len(m.group(1)), m.group(2).strip(), line.strip())
            i += 1
            continue
        # reStructuredText / setext: "Title" over "=====" (optionally with an overline too)
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if (line.strip() and not line[0].isspace() and len(line) <= 150 and not para
                and _UNDERLINE.match(nxt) and len(nxt.strip()) >= min(len(line.strip()), 3)):
            style = nxt.strip()[0]
            level = rst_levels.setdefault(style, len(rst_levels) + 1)
            push_heading(level, line.strip(), f"{line.strip()}\n{nxt.strip()}")
            i += 2
            continue
        if _UNDERLINE.match(line) and nxt.strip() and i + 2 < len(lines) and _UNDERLINE.match(lines[i + 2]) and not para:
            style = "over" + line.strip()[0]
            level = rst_levels.setdefault(style, len(rst_levels) + 1)
            push_heading(level, nxt.strip(), "\n".join(lines[i : i + 3]))
            i += 3
            continue
        if not line.strip():
            flush_para()
        else:
            para.append(line)
        i += 1
    flush_para()
    return blocks


def _path(stack: list[tuple[int, str]], doc_title: str) -> tuple[str, ...]:
    names = [h for _, h in stack]
    if not names or names[0] != doc_title:
        names = [doc_title, *names] if doc_title else names
    return tuple(names)


def _structured_blocks(doc: Document) -> list[_Block]:
    """A PDF's or DOCX's blocks (rag.ingest.readers) with their heading paths and pages; nothing is re-parsed, so a
    line of the document that looks like Markdown stays text."""
    blocks: list[_Block] = []
    stack: list[tuple[int, str]] = []
    for b in doc.blocks:
        pages = (b.page, b.page_end or b.page) if b.page is not None else None
        if b.kind == "heading":
            while stack and stack[-1][0] >= b.level:
                stack.pop()
            stack.append((b.level, b.text))
            blocks.append(_Block("heading", b.markdown(), _path(stack, doc.title), pages))
        else:
            blocks.append(_Block("table" if b.kind == "table" else "para", b.text, _path(stack, doc.title), pages))
    return blocks


def page_label(meta: dict[str, Any] | None) -> str:
    """``"p. 12"`` or ``"pp. 12-13"`` for a chunk's (or hit's) metadata; "" when it has no page."""
    if not isinstance(meta, dict) or not isinstance(meta.get("page"), int):
        return ""
    first, last = meta["page"], meta.get("page_end")
    return f"pp. {first}-{last}" if isinstance(last, int) and last > first else f"p. {first}"


def _split_long(block: _Block, size: int) -> list[str]:
    """Pieces of an over-long block, each <= ``size``: lines for code/tables, sentences then words for prose."""
    text = block.text
    if block.kind in ("code", "table"):
        lines = text.split("\n")
        header: list[str] = []
        if block.kind == "table" and len(lines) > 2 and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[1]):
            header = lines[:2]
            lines = lines[2:]
        units, sep = lines, "\n"
    else:
        units = re.split(r"(?<=[.!?:;])\s+", text)
        header, sep = [], " "
    head = sep.join(header)
    max_unit = max(1, size - len(head) - len(sep))
    pieces: list[str] = []
    current: list[str] = list(header)

    def emit() -> None:
        nonlocal current
        if len(current) > len(header):
            pieces.append(sep.join(current))
        current = list(header)

    for unit in units:
        while len(unit) > max_unit:  # one sentence/line longer than a chunk: cut at a space
            cut = unit.rfind(" ", 0, max_unit)
            cut = cut if cut > max_unit // 2 else max_unit
            emit()
            current.append(unit[:cut])
            emit()
            unit = unit[cut:].lstrip()
        if len(sep.join([*current, unit])) > size:
            emit()
        current.append(unit)
    emit()
    return pieces


def _tail(text: str, overlap: int) -> str:
    """The last ~``overlap`` characters of ``text``, starting at a word boundary."""
    if overlap <= 0 or not text:
        return ""
    tail = text[-overlap:]
    if len(text) > overlap:
        space = tail.find(" ")
        tail = tail[space + 1 :] if 0 <= space < len(tail) - 1 else tail
    return tail.strip()


def _common_prefix(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    out: list[str] = []
    for parts in zip(*paths):
        if any(p != parts[0] for p in parts):
            break
        out.append(parts[0])
    return tuple(out) or paths[0][:1]


def chunk_document(doc: Document, size: int = 1200, overlap: int = 150) -> list[Chunk]:
    """Chunks of one document (see the module docstring for the rules)."""
    if size < 1 or not 0 <= overlap < size:
        raise ConfigError(f"chunk size/overlap: need size >= 1 and 0 <= overlap < size, got {size}/{overlap}")
    min_fill = size // 4
    # (text, heading path, starts with a heading, separator when joined to the previous piece, pages)
    pieces: list[tuple[str, tuple[str, ...], bool, str, tuple[int, int] | None]] = []
    for block in _structured_blocks(doc) if doc.blocks else _split_blocks(doc.text, doc.title):
        texts = [block.text] if len(block.text) <= size else _split_long(block, size - overlap)
        glue = " " if block.kind == "para" else "\n"  # pieces of one split block rejoin as they were cut
        for j, t in enumerate(texts):
            pieces.append((t, block.path, block.kind == "heading", "\n\n" if j == 0 else glue, block.pages))

    groups: list[tuple[str, list[tuple[str, ...]], list[int]]] = []
    body, prefix, prefix_sep = "", "", "\n\n"
    paths: list[tuple[str, ...]] = []
    # pages of the body's text and of its headings (the overlap carried in from the chunk before is not counted):
    # a chunk that ends on the next section's heading is cited by the pages of its text
    pages: dict[bool, list[int]] = {False: [], True: []}

    def close() -> None:
        groups.append((prefix_sep.join(p for p in (prefix, body) if p), paths, pages[False] or pages[True]))

    for text, path, heading, sep, span in pieces:
        joined = body + sep + text if body else text
        full = len(prefix) + 2 + len(joined) if prefix else len(joined)
        if body and ((heading and len(body) >= min_fill) or full > size):
            close()
            same_section = not heading and path == paths[-1]
            prefix = _tail(body, overlap) if same_section else ""
            prefix_sep = sep  # mid-paragraph cut: the overlap reads on as one paragraph
            if len(prefix) + 2 + len(text) > size:
                prefix = ""
            body, paths, pages = text, [path], {False: [], True: []}
        else:
            body = joined
            paths.append(path)
        pages[heading].extend(span or ())
    if body:
        close()

    chunks = []
    for n, (text, group_paths, group_pages) in enumerate(groups):
        title_path = _common_prefix(group_paths)
        where: dict[str, int] = {}
        if group_pages:
            where["page"] = min(group_pages)
            if max(group_pages) > where["page"]:
                where["page_end"] = max(group_pages)
        chunks.append(Chunk(
            id=f"{doc.doc_id}#{n:03d}",
            text=text,
            title=TITLE_SEP.join(title_path) or doc.title,
            source=doc.source,
            url=doc.url,
            meta={**doc.meta, "doc_id": doc.doc_id, "position": n, **where},
        ))
    return chunks


def chunk_documents(docs: Iterable[Document], size: int = 1200, overlap: int = 150) -> list[Chunk]:
    """Chunks of all ``docs``, in document order. Ids are unique as long as ``doc_id`` s are."""
    out: list[Chunk] = []
    for doc in docs:
        out.extend(chunk_document(doc, size, overlap))
    return out


def load_chunks_jsonl(path: str | Path) -> list[Chunk]:
    """Pre-chunked records, one JSON object per line: ``id`` and ``text`` required; ``title``, ``url``,
    ``source`` optional; any other field goes to ``meta``. Ids are kept verbatim.

    Raises :class:`InputError` naming the line and field for bad JSON, a missing/empty ``id`` or
    ``text``, a non-string field, a duplicate id, or a file with no records.
    """
    file = Path(path).expanduser()
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for lineno, where, rec in json_lines(file, missing="no such file; --chunks expects a JSONL file with one {\"id\", \"text\"} object per line",
                                         expect="each line must be one JSON object"):
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected a JSON object with 'id' and 'text', got {type(rec).__name__}")
        for name in ("id", "text"):
            value = rec.get(name)
            if value is None:
                raise InputError(f"{where}: missing required field {name!r}; every record needs 'id' and 'text'")
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"{where}: field {name!r} must be a non-empty string, got {value!r:.60}")
        for name in ("title", "url", "source"):
            if rec.get(name) is not None and not isinstance(rec[name], str):
                raise InputError(f"{where}: field {name!r} must be a string, got {type(rec[name]).__name__}")
        if rec.get("doc_id") is not None and not isinstance(rec["doc_id"], (str, int, float)):
            raise InputError(f"{where}: field 'doc_id' must be a string or a number, got {type(rec['doc_id']).__name__}; "
                             "chunks of one document share one doc_id")
        for name, value in rec.items():
            try:
                json.dumps(value, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                raise InputError(f"{where}: field {name!r} holds a lone surrogate escape (e.g. \\ud800), which is "
                                 "not valid Unicode; fix the text that wrote it") from None
        cid = rec["id"]
        if cid in seen:
            raise InputError(f"{where}: duplicate id {cid!r} (first on line {seen[cid]}); chunk ids must be unique")
        seen[cid] = lineno
        meta = {k: v for k, v in rec.items() if k not in ("id", "text", "title", "url", "source")}
        chunks.append(Chunk(id=cid, text=rec["text"], title=rec.get("title") or "", source=rec.get("source") or str(rec.get("doc_id") or ""),
                            url=rec.get("url") or "", meta=meta))
    if not chunks:
        raise InputError(f"{file}: no records; expected one JSON object with 'id' and 'text' per line")
    return chunks
