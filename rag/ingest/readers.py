"""PDF and Word (.docx) files -> structured blocks (headings, paragraphs, tables), each with its pages.

Both readers stream: a PDF is parsed one page at a time (pdfplumber over pdfminer.six, which reads the file
by seeking, never whole; each page's parsed objects are dropped before the next), and a .docx's main XML
part is read from the ZIP package in 64 KiB pieces with lxml's pull parser, each top-level paragraph or
table handed to python-docx's element classes and freed once read (python-docx's own ``Document()`` would
load every part of the package, images included, into memory). The text kept is bounded by
``max_chars`` (the ``max_file_mb`` setting): a file whose text grows past it is skipped.

What is kept of the structure:

* **headings** become :class:`Block` ``heading`` blocks with a level, so the chunker gives
  chunks a section path. DOCX: paragraph styles named "Title" (level 0) and "Heading N" (level N), or
  any style or paragraph with an outline level, inherited along ``basedOn``; table-of-contents entries
  ("TOC N" styles) are dropped. PDF: the outline (bookmarks) when the file has one, each entry matched
  to its line on its destination page (or placed where the destination points when no line matches);
  otherwise short, stand-alone lines set in a font clearly larger than the body text (level 1 at >= 1.5x
  the body size, 2 at >= 1.25x, 3 at >= 1.12x; the body size is the commonest character size so far).
* **tables** become one ``table`` block each, as a Markdown table (first row as header), so the chunker
  keeps a table whole when it fits in a chunk. PDF tables are found from their ruling lines
  (pdfplumber's table finder); one that runs on at the top of the next page with the same columns is
  joined to it (a repeated header row is dropped). A DOCX table's merged cells are repeated as empty cells
  so every row has the grid's width.
* **pages**: every block carries its first and last page (1-based). A PDF has them exactly. A DOCX has no
  fixed pages: Word records where its pages fell when it last laid the file out (``lastRenderedPageBreak``)
  and those are used; a file with none (written by other tools) is paginated by its hard page breaks,
  "page break before" paragraphs and new-page section breaks; a file with neither gets no page numbers.

Text is read in lines top to bottom (pdfplumber's text lines), so a page set in two columns reads across both
columns line by line; paragraphs are rebuilt from the vertical gaps between lines.

Files that cannot be read raise :class:`Unreadable` with a short ``reason`` (counted in ``rag index``'s
summary) and a one-line ``detail``: ``encrypted`` (needs a password), ``corrupt`` (not parseable as its
format), ``empty`` (no text, no images) and ``image-only`` (scanned pages with no text layer). Pages or
parts that fail while the rest reads are reported in :attr:`Parsed.notes` instead.
"""

from __future__ import annotations

import contextlib
import logging
import re
import statistics
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Block:
    """One structural unit of a PDF or Word document: a ``heading`` (``level`` 1 = top; 0 = the document's own
    title), a ``para`` or a ``table`` (a Markdown table). ``page`` is its first page (1-based, None when the file
    has no pages) and ``page_end`` its last when it runs onto later pages."""

    kind: str  # heading | para | table
    text: str
    level: int = 0
    page: int | None = None
    page_end: int | None = None

    def markdown(self) -> str:
        return f"{'#' * min(6, max(1, self.level))} {self.text}" if self.kind == "heading" else self.text


OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # Compound File Binary: legacy .doc, or an encrypted OOXML file
PDF_LOGGERS = ("pdfminer", "pdfplumber", "PIL")


class Unreadable(Exception):
    """A file that cannot be indexed: ``reason`` is the summary's key, ``detail`` says why in one line."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}" if detail and not detail.startswith(reason) else detail or reason)
        self.reason = reason
        self.detail = detail or reason


@dataclass
class Parsed:
    """What a reader got from a file: its title ("" when the file names none), blocks, page count and notes."""

    title: str
    blocks: list[Block]
    pages: int = 0
    notes: list[str] = field(default_factory=list)


def page_ranges(pages: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"``."""
    out: list[str] = []
    for p in sorted(set(pages)):
        if out and p == int(out[-1].split("-")[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{p}"
        else:
            out.append(str(p))
    return ", ".join(out)


def markdown_table(rows: list[list[str]]) -> str:
    """Rows of cell texts as a Markdown table (first row as header); cells on one line, pipes escaped."""
    width = max(len(r) for r in rows)
    lines = []
    for i, row in enumerate(rows):
        cells = [" ".join((c or "").split()).replace("|", "\\|") for c in row] + [""] * (width - len(row))
        lines.append("| " + " | ".join(cells) + " |")
        if i == 0:
            lines.append("|" + " --- |" * width)
    return "\n".join(lines)


class _Budget:
    """Counts the characters read from one file and stops the read when they pass ``max_chars``."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars, self.used = max_chars, 0

    def add(self, text: str) -> None:
        self.used += len(text)
        if self.used > self.max_chars:
            raise Unreadable(f"over max_file_mb={self.max_chars / 1e6:g}",
                             f"its text passes max_file_mb={self.max_chars / 1e6:g} (raise it with SIEVE_MAX_FILE_MB "
                             "or max_file_mb in sieve.toml)")


@contextlib.contextmanager
def _quiet_parsers() -> Iterator[None]:
    """Parser warnings and log lines (pdfminer is chatty about every odd object) stay out of the output: what
    matters reaches the user as one line per file."""
    loggers = [logging.getLogger(name) for name in PDF_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR + 10)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _short(exc: BaseException, limit: int = 120) -> str:
    cause = exc
    while cause.__cause__ is not None or (cause.args and isinstance(cause.args[0], BaseException)):
        cause = cause.__cause__ if cause.__cause__ is not None else cause.args[0]
    text = " ".join(str(cause).split()) or type(cause).__name__
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return f"{type(cause).__name__}: {text}" if type(cause).__name__ not in text else text


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


# ====================================================================== PDF
def _exc_chain(exc: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        nxt = exc.__cause__ or exc.__context__
        if nxt is None and exc.args and isinstance(exc.args[0], BaseException):
            nxt = exc.args[0]
        exc = nxt  # type: ignore[assignment]
    return chain


def _open_pdf(path: Path) -> Any:
    """pdfplumber's PDF for ``path``, or :class:`Unreadable` (encrypted / corrupt / empty)."""
    import pdfplumber
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect

    if path.stat().st_size == 0:
        raise Unreadable("empty", "an empty file (0 bytes)")
    with path.open("rb") as fh:
        head = fh.read(1024)
    if b"%PDF-" not in head:
        raise Unreadable("corrupt", "not a PDF (no %PDF- header)")
    try:
        return pdfplumber.open(path)
    except Exception as exc:  # noqa: BLE001 - pdfminer raises many kinds for a damaged file
        chain = _exc_chain(exc)
        if any(isinstance(e, PDFPasswordIncorrect) for e in chain):
            raise Unreadable("encrypted", "encrypted: it needs a password to open (save an unprotected copy, e.g. "
                             "qpdf --decrypt --password=... in.pdf out.pdf)") from None
        if any(isinstance(e, PDFEncryptionError) for e in chain):
            raise Unreadable("encrypted", f"encrypted with a scheme that cannot be opened ({_short(exc)})") from None
        raise Unreadable("corrupt", f"cannot be parsed as a PDF ({_short(exc)})") from None


def _resolve_dest(doc: Any, dest: Any, action: Any) -> tuple[int | None, float | None]:
    """(page object id, y in PDF user space or None) an outline entry points to; (None, None) when unknown."""
    from pdfminer.pdftypes import PDFObjRef, resolve1
    from pdfminer.psparser import PSLiteral

    if dest is None and action is not None:
        action = resolve1(action)
        if isinstance(action, dict):
            kind = action.get("S")
            if getattr(kind, "name", kind) == "GoTo":
                dest = action.get("D")
    dest = resolve1(dest)
    for _ in range(3):  # named destinations, possibly indirect, possibly a {/D [...]} dictionary
        if isinstance(dest, (bytes, str, PSLiteral)):
            name = dest.name if isinstance(dest, PSLiteral) else dest
            try:
                dest = resolve1(doc.get_dest(name))
            except Exception:  # noqa: BLE001 - an unknown name: no destination
                return None, None
        if isinstance(dest, dict):
            dest = resolve1(dest.get("D"))
        else:
            break
    if not isinstance(dest, list) or not dest:
        return None, None
    ref = dest[0]
    objid = ref.objid if isinstance(ref, PDFObjRef) else None
    y = None
    kind = getattr(dest[1], "name", None) if len(dest) > 1 else None
    if kind == "XYZ" and len(dest) > 3 and isinstance(resolve1(dest[3]), (int, float)):
        y = float(resolve1(dest[3]))
    elif kind in ("FitH", "FitBH") and len(dest) > 2 and isinstance(resolve1(dest[2]), (int, float)):
        y = float(resolve1(dest[2]))
    return objid, y


def _pdf_outline(doc: Any) -> dict[int, list[tuple[int, str, float | None]]]:
    """page object id -> [(level, title, y)] from the PDF's outline (empty when it has none or it is unreadable)."""
    out: dict[int, list[tuple[int, str, float | None]]] = {}
    try:
        for level, title, dest, action, _se in doc.get_outlines():
            title = " ".join(str(title or "").split())
            if not title:
                continue
            objid, y = _resolve_dest(doc, dest, action)
            if objid is not None:
                out.setdefault(objid, []).append((max(1, int(level)), title, y))
    except Exception:  # noqa: BLE001 - PDFNoOutlines, or a damaged outline: no outline
        return {}
    return out


@dataclass
class _Line:
    top: float
    bottom: float
    text: str
    size: float
    kind: str = "line"  # line | heading | table
    level: int = 0
    rows: list[list[str]] | None = None


_SENTENCE_END = re.compile(r"[.!?:;)\]\"”’]$")


def _page_items(page: Any) -> tuple[list[_Line], int]:
    """Text lines and tables of one page, top to bottom; and the page's image count."""
    tables = []
    for table in page.find_tables():
        rows = [[(c or "") for c in row] for row in table.extract()]
        rows = [r for r in rows if any(c.strip() for c in r)]
        if len(rows) >= 2 and max(len(r) for r in rows) >= 2:  # a box drawn round a paragraph is not a table
            tables.append((table.bbox, rows))

    def outside(obj: dict[str, Any]) -> bool:
        if obj.get("object_type") != "char":
            return True
        cx, cy = (obj["x0"] + obj["x1"]) / 2, (obj["top"] + obj["bottom"]) / 2
        return not any(x0 <= cx <= x1 and top <= cy <= bottom for (x0, top, x1, bottom), _ in tables)

    view = page.filter(outside) if tables else page
    items: list[_Line] = []
    for line in view.extract_text_lines(return_chars=True, strip=True):
        text = " ".join(line["text"].split())
        if not text:
            continue
        sizes = Counter(round(float(c.get("size", 0)) * 2) / 2 for c in line["chars"] if not c["text"].isspace())
        size = sizes.most_common(1)[0][0] if sizes else 0.0
        items.append(_Line(float(line["top"]), float(line["bottom"]), text, size))
    for (_x0, top, _x1, bottom), rows in tables:
        items.append(_Line(float(top), float(bottom), "", 0.0, kind="table", rows=rows))
    items.sort(key=lambda it: it.top)
    return items, len(page.images)


def _mark_outline_headings(items: list[_Line], entries: list[tuple[int, str, float | None]], height: float) -> list[_Line]:
    """Turn the lines that the outline ``entries`` point to into headings (a heading set over two lines is
    joined); an entry matching no line is inserted where its destination points."""
    for level, title, y in entries:
        want = _norm(title)
        done = False
        for i, it in enumerate(items):
            if it.kind != "line":
                continue
            got = _norm(it.text)
            if got == want or (want.startswith(got) and len(got) >= 4):
                j = i
                while got != want and j + 1 < len(items) and items[j + 1].kind == "line" \
                        and want.startswith(_norm(got + " " + items[j + 1].text)):
                    j += 1
                    got = _norm(got + " " + items[j].text)
                if got != want:
                    continue
                it.kind, it.level, it.text, it.bottom = "heading", level, title, items[j].bottom
                del items[i + 1 : j + 1]
                done = True
                break
        if not done:
            top = height - y if y is not None else 0.0
            at = next((k for k, it in enumerate(items) if it.top >= top - 2), len(items))
            items.insert(at, _Line(top, top, title, 0.0, kind="heading", level=level))
    return items


def _mark_size_headings(items: list[_Line], body: float) -> None:
    """Short stand-alone lines set clearly larger than the body text become headings (level by size ratio)."""
    if body <= 0:
        return
    for it in items:
        if it.kind != "line" or it.size < body * 1.12 or len(it.text) > 120 or len(it.text.split()) > 16:
            continue
        if not re.search(r"[^\W\d_]", it.text) or (it.text.endswith(".") and len(it.text.split()) > 6):
            continue
        it.kind = "heading"
        it.level = 1 if it.size >= body * 1.5 else 2 if it.size >= body * 1.25 else 3
    # a heading set over two lines of the same size is one heading
    i = 0
    while i + 1 < len(items):
        a, b = items[i], items[i + 1]
        if a.kind == b.kind == "heading" and a.size == b.size and a.level == b.level and b.top - a.bottom < a.size * 0.8:
            a.text, a.bottom = f"{a.text} {b.text}", b.bottom
            del items[i + 1]
        else:
            i += 1
    for it in items:  # a run of large-type lines that long is a callout or a cover, not a heading
        if it.kind == "heading" and len(it.text) > 150:
            it.kind, it.level = "line", 0


def _page_blocks(items: list[_Line], page_no: int) -> list[Block]:
    """Lines -> blocks: headings and tables as they are, other lines grouped into paragraphs at vertical gaps
    wider than the page's usual line spacing (or at a change of font size)."""
    lines = [it for it in items if it.kind == "line"]
    gaps = [b.top - a.bottom for a, b in zip(lines, lines[1:]) if b.top >= a.bottom - 1 and a.size == b.size]
    usual = statistics.median(gaps) if gaps else 0.0
    blocks: list[Block] = []
    para: list[_Line] = []

    def flush() -> None:
        if para:
            text = para[0].text
            for prev, line in zip(para, para[1:]):
                joined = prev.text.endswith("-") and prev.text[-2:-1].isalpha() and line.text[:1].islower()
                text += ("" if joined else " ") + line.text
            blocks.append(Block("para", text, page=page_no))
            para.clear()

    for it in items:
        if it.kind == "heading":
            flush()
            blocks.append(Block("heading", it.text, level=it.level, page=page_no))
        elif it.kind == "table":
            flush()
            blocks.append(Block("table", markdown_table(it.rows or []), page=page_no))
        else:
            if para:
                prev = para[-1]
                gap = it.top - prev.bottom
                if abs(it.size - prev.size) > 0.6 or gap > max(usual * 1.6, usual + 0.35 * max(prev.size, 1.0)):
                    flush()
            para.append(it)
    flush()
    return blocks


def _join_across_pages(prev: Block, nxt: Block) -> Block | None:
    """One block when ``nxt`` (first on its page) continues ``prev`` (last on the page before): a table with the
    same columns, or a paragraph cut mid-sentence that goes on in lower case. None otherwise."""
    if prev.kind == nxt.kind == "table":
        a, b = prev.text.split("\n"), nxt.text.split("\n")
        if a[0].count(" | ") != b[0].count(" | "):
            return None
        rows = b[2:] if b[0] == a[0] else [b[0], *b[2:]]
        return Block("table", "\n".join([*a, *rows]), page=prev.page, page_end=nxt.page_end or nxt.page)
    if prev.kind == nxt.kind == "para" and not _SENTENCE_END.search(prev.text) and nxt.text[:1].islower():
        return Block("para", f"{prev.text} {nxt.text}", page=prev.page, page_end=nxt.page_end or nxt.page)
    return None


def read_pdf(path: str | Path, max_chars: int) -> Parsed:
    """Headings, paragraphs and tables of a PDF, page by page (see the module docstring)."""
    from pdfminer.pdfpage import PDFPage
    from pdfplumber.page import Page

    path = Path(path)
    with _quiet_parsers():
        pdf = _open_pdf(path)
        try:
            return _read_pdf_pages(pdf, PDFPage, Page, max_chars)
        finally:
            with contextlib.suppress(Exception):
                pdf.close()


def _read_pdf_pages(pdf: Any, PDFPage: Any, Page: Any, max_chars: int) -> Parsed:
    doc = pdf.doc
    doc.caching = False  # parsed objects are not kept for the whole file: each page's go with it
    title = _pdf_title(pdf.metadata)
    outline = _pdf_outline(doc)
    budget = _Budget(max_chars)
    blocks: list[Block] = []
    held: Block | None = None  # the last block of the page before: the next page may continue it
    sizes: Counter[float] = Counter()
    no_text: list[int] = []
    failed: list[int] = []
    images = 0
    count = 0
    notes: list[str] = []
    pages = PDFPage.create_pages(doc)
    while True:
        try:
            page_obj = next(pages)
        except StopIteration:
            break
        except Exception as exc:  # noqa: BLE001 - a damaged page tree: keep the pages read so far
            if not count:
                raise Unreadable("corrupt", f"its pages cannot be read ({_short(exc)})") from None
            notes.append(f"stopped after page {count}: the rest cannot be read ({_short(exc)})")
            break
        count += 1
        page = Page(pdf, page_obj, page_number=count)
        try:
            items, n_images = _page_items(page)
        except Exception:  # noqa: BLE001 - one damaged page does not lose the others
            failed.append(count)
            continue
        finally:
            page.close()
        images += n_images
        for it in items:
            if it.kind == "line":
                sizes[it.size] += len(it.text)
        if not any(it.text or it.rows for it in items):
            if n_images:
                no_text.append(count)
            continue
        if page_obj.pageid in outline:
            items = _mark_outline_headings(items, outline[page_obj.pageid], float(page.height))
        elif not outline:
            _mark_size_headings(items, sizes.most_common(1)[0][0] if sizes else 0.0)
        new = _page_blocks(items, count)
        for block in new:
            budget.add(block.text)
        if held is not None and new:
            joined = _join_across_pages(held, new[0])
            if joined is not None:
                new[0] = joined
            else:
                blocks.append(held)
        elif held is not None:
            blocks.append(held)
        held = new.pop() if new else None
        blocks.extend(new)
    if held is not None:
        blocks.append(held)
    if not blocks:
        if no_text:
            raise Unreadable("image-only", f"no text layer on any of its {count} page(s): scanned images only (run OCR "
                             "first, e.g. ocrmypdf in.pdf out.pdf)")
        if failed:
            raise Unreadable("corrupt", f"none of its {count} page(s) could be read")
        raise Unreadable("empty", f"no text in its {count} page(s)" if count else "no pages")
    if no_text:
        notes.append(f"page{'s' if len(no_text) > 1 else ''} {page_ranges(no_text)} of {count} ha"
                     f"{'ve' if len(no_text) > 1 else 's'} no text layer (scanned?) and {'are' if len(no_text) > 1 else 'is'}"
                     f" not indexed; OCR the file to index {'them' if len(no_text) > 1 else 'it'} (e.g. ocrmypdf)")
    if failed:
        notes.append(f"page{'s' if len(failed) > 1 else ''} {page_ranges(failed)} of {count} could not be read and "
                     f"{'are' if len(failed) > 1 else 'is'} not indexed")
    return Parsed(title=title, blocks=blocks, pages=count, notes=notes)


def _pdf_title(metadata: dict[str, Any]) -> str:
    """The document title from the PDF's Info dictionary, unless it is empty or a file name."""
    title = metadata.get("Title")
    if isinstance(title, bytes):
        title = title.decode("utf-8", "replace")
    title = " ".join(str(title or "").split())
    if not title or re.search(r"\.(docx?|pdf|odt|rtf|txt|indd|qxd)$", title, re.I) or title.lower() in ("untitled", "title"):
        return ""
    return title


# ====================================================================== DOCX
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_REL = "http://schemas.openxmlformats.org/package/2006/relationships"


def _w(tag: str) -> str:
    return f"{{{_W}}}{tag}"


def _wval(el: Any, tag: str) -> str | None:
    child = el.find(_w(tag)) if el is not None else None
    return None if child is None else child.get(_w("val"))


def _ole_encrypted(path: Path) -> bool:
    """An OLE (Compound File) container holding an encrypted Office document (its ``EncryptionInfo`` stream)."""
    marker = "EncryptionInfo".encode("utf-16-le")
    tail = b""
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            if marker in tail + block:
                return True
            tail = block[-len(marker):]
    return False


def _rels(zf: Any, name: str) -> dict[str, str]:
    """Relationship type (its last path segment) -> target part name, for the part ``name`` ("" = the package)."""
    from lxml import etree

    folder, _, base = name.rpartition("/")
    rels_name = f"{folder}/_rels/{base}.rels" if name else "_rels/.rels"
    try:
        root = etree.fromstring(zf.read(rels_name), etree.XMLParser(resolve_entities=False, no_network=True))
    except (KeyError, etree.XMLSyntaxError):
        return {}
    out: dict[str, str] = {}
    for rel in root.iter(f"{{{_REL}}}Relationship"):
        target = rel.get("Target") or ""
        if rel.get("TargetMode") == "External" or not target:
            continue
        if target.startswith("/"):
            part = target.lstrip("/")
        else:
            parts = [p for p in (folder.split("/") if folder else [])]
            for seg in target.split("/"):
                if seg == "..":
                    parts = parts[:-1]
                elif seg and seg != ".":
                    parts.append(seg)
            part = "/".join(parts)
        out.setdefault((rel.get("Type") or "").rsplit("/", 1)[-1], part)
    return out


def _docx_styles(zf: Any, name: str | None) -> dict[str, tuple[str, int | None, bool]]:
    """Paragraph style id -> (name, heading level or None, is a list style), inherited along ``basedOn``."""
    from docx.oxml.parser import parse_xml

    if not name:
        return {}
    try:
        root = parse_xml(zf.read(name))
    except Exception:  # noqa: BLE001 - no or damaged styles: no heading styles
        return {}
    raw: dict[str, tuple[str, int | None, str | None, bool]] = {}
    for st in root.iter(_w("style")):
        if st.get(_w("type"), "paragraph") != "paragraph":
            continue
        sid = st.get(_w("styleId")) or ""
        sname = (_wval(st, "name") or sid).strip()
        level: int | None = None
        m = re.fullmatch(r"heading\s*(\d)", sname, re.I)
        if sname.lower() == "title":
            level = 0
        elif m:
            level = int(m.group(1))
        else:
            lvl = _wval(st.find(_w("pPr")), "outlineLvl")
            if lvl is not None and lvl.isdigit() and int(lvl) < 9:
                level = int(lvl) + 1
        ppr = st.find(_w("pPr"))
        listed = (ppr is not None and ppr.find(_w("numPr")) is not None) or bool(re.match(r"list (bullet|number)", sname, re.I))
        raw[sid] = (sname, level, _wval(st, "basedOn"), listed)
    out: dict[str, tuple[str, int | None, bool]] = {}
    for sid, (sname, level, base, listed) in raw.items():
        seen = {sid}
        while (level is None or not listed) and base in raw and base not in seen and not sname.lower().startswith("toc"):
            seen.add(base)
            _, base_level, base, base_listed = raw[base]
            level = level if level is not None else base_level
            listed = listed or base_listed
        out[sid] = (sname, level, listed)
    return out


def _core_title(zf: Any) -> str:
    from lxml import etree

    try:
        root = etree.fromstring(zf.read("docProps/core.xml"), etree.XMLParser(resolve_entities=False, no_network=True))
    except (KeyError, etree.XMLSyntaxError):
        return ""
    el = root.find("{http://purl.org/dc/elements/1.1/}title")
    return " ".join((el.text or "").split()) if el is not None else ""


def _has_rendered_breaks(zf: Any, name: str) -> bool:
    marker, tail = b"lastRenderedPageBreak", b""
    with zf.open(name) as fh:
        while block := fh.read(1 << 20):
            if marker in tail + block:
                return True
            tail = block[-len(marker):]
    return False


def _body_elements(zf: Any, name: str) -> Iterator[Any]:
    """The main part's top-level body children (paragraphs, tables, content controls) in order, each freed after
    use: the XML is pulled in 64 KiB pieces, so the whole part is never in memory."""
    from docx.oxml.parser import element_class_lookup
    from lxml import etree

    parser = etree.XMLPullParser(events=("start", "end"), remove_blank_text=True, resolve_entities=False,
                                 no_network=True, huge_tree=True)
    parser.set_element_class_lookup(element_class_lookup)
    depth, body = 0, None
    with zf.open(name) as fh:
        while True:
            data = fh.read(1 << 16)
            if data:
                parser.feed(data)
            else:
                parser.close()
            for event, el in parser.read_events():
                if event == "start":
                    depth += 1
                    if depth == 2 and el.tag == _w("body"):
                        body = el
                    continue
                depth -= 1
                if body is not None and depth == 2 and el.getparent() is body:
                    yield el
                    el.clear()
                    while el.getprevious() is not None:
                        del body[0]
            if not data:
                return


_RUNS = None


def _text_of(el: Any) -> str:
    """A paragraph's visible text: runs anywhere inside it (hyperlinks, tracked insertions, fields, content
    controls, text boxes), not deleted text and not the fallback copy of a drawing."""
    global _RUNS
    if _RUNS is None:
        from lxml import etree

        _RUNS = etree.XPath(".//w:r[not(ancestor::mc:Fallback) and not(ancestor::w:del)]",
                            namespaces={"w": _W, "mc": _MC})
    return "".join(r.text for r in _RUNS(el) if hasattr(r, "text") and isinstance(r.text, str))


class _DocxPages:
    """The page a DOCX's content is on, counted from rendered page breaks, or else from hard breaks."""

    def __init__(self, rendered: bool) -> None:
        self.rendered = rendered
        self.page, self.pending, self.breaks = 1, 0, 0

    def span(self, el: Any, *, before: int = 0, after: int = 0) -> tuple[int, int]:
        """(first, last) page of the text in ``el``; page breaks inside it and ``before``/``after`` it move on."""
        self.pending += before
        first = last = None
        for node in el.iter(_w("t"), _w("br"), _w("lastRenderedPageBreak")):
            tag = node.tag.rsplit("}", 1)[-1]
            if tag == "t":
                if node.text:
                    self.page += self.pending
                    self.breaks += self.pending
                    self.pending = 0
                    first = self.page if first is None else first
                    last = self.page
            elif tag == "lastRenderedPageBreak" and self.rendered:
                self.pending += 1
            elif tag == "br" and not self.rendered and node.get(_w("type")) == "page":
                self.pending += 1
        self.pending += after
        return (first or self.page + self.pending, last or self.page + self.pending)


def _docx_paragraph_level(p: Any, styles: dict[str, tuple[str, int | None, bool]]) -> tuple[int | None, bool, bool]:
    """(heading level or None, is a TOC entry, is a list item) of a ``w:p``."""
    ppr = p.find(_w("pPr"))
    sid = _wval(ppr, "pStyle") or ""
    name, level, listed = styles.get(sid, (sid, None, False))
    toc = name.lower().startswith("toc") or sid.lower().startswith("toc")
    lvl = _wval(ppr, "outlineLvl")
    if lvl is not None and lvl.isdigit():
        level = int(lvl) + 1 if int(lvl) < 9 else None
    listed = level is None and (listed or (ppr is not None and ppr.find(_w("numPr")) is not None))
    return level, toc, listed


def _docx_table(tbl: Any) -> list[list[str]]:
    """Rows of cell texts; a cell spanning N grid columns is followed by N-1 empty cells, a vertically merged
    continuation cell is empty."""
    rows = []
    for tr in tbl.iterchildren(_w("tr")):
        row: list[str] = []
        for tc in tr.iterchildren(_w("tc")):
            tcpr = tc.find(_w("tcPr"))
            span = _wval(tcpr, "gridSpan")
            vmerge = tcpr.find(_w("vMerge")) if tcpr is not None else None
            continued = vmerge is not None and vmerge.get(_w("val"), "continue") == "continue"
            text = "" if continued else " ".join(_text_of(p) for p in tc.iter(_w("p")))
            row.append(text)
            row.extend([""] * (int(span) - 1 if span and span.isdigit() and int(span) > 1 else 0))
        rows.append(row)
    return rows


def read_docx(path: str | Path, max_chars: int) -> Parsed:
    """Headings, paragraphs and tables of a Word .docx, streamed (see the module docstring)."""
    import zipfile

    path = Path(path)
    if path.stat().st_size == 0:
        raise Unreadable("empty", "an empty file (0 bytes)")
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        with path.open("rb") as fh:
            head = fh.read(8)
        if head == OLE_MAGIC:
            if _ole_encrypted(path):
                raise Unreadable("encrypted", "encrypted: it needs a password to open (open it in Word, remove the "
                                 "password under File > Info > Protect Document, and save)") from None
            raise Unreadable("corrupt", "a legacy Word .doc file named .docx, not a .docx (save it as .docx)") from None
        raise Unreadable("corrupt", "not a .docx (not a ZIP package)") from None
    with zf, _quiet_parsers():
        try:
            return _read_docx_package(zf, max_chars)
        except Unreadable:
            raise
        except Exception as exc:  # noqa: BLE001 - a damaged package or XML part
            raise Unreadable("corrupt", f"cannot be read as a .docx ({_short(exc)})") from None


def _read_docx_package(zf: Any, max_chars: int) -> Parsed:
    main = _rels(zf, "").get("officeDocument") or "word/document.xml"
    if main not in zf.namelist():
        raise Unreadable("corrupt", f"not a .docx: the package has no {main}")
    styles = _docx_styles(zf, _rels(zf, main).get("styles"))
    pages = _DocxPages(_has_rendered_breaks(zf, main))
    budget = _Budget(max_chars)
    blocks: list[Block] = []
    title, images = "", 0

    def paragraph(p: Any) -> None:
        nonlocal title, images
        level, toc, listed = _docx_paragraph_level(p, styles)
        ppr = p.find(_w("pPr"))
        before = int(not pages.rendered and ppr is not None and ppr.find(_w("pageBreakBefore")) is not None
                     and ppr.find(_w("pageBreakBefore")).get(_w("val"), "true") not in ("false", "0", "off"))
        sect = ppr.find(_w("sectPr")) if ppr is not None else None
        after = int(not pages.rendered and sect is not None and (_wval(sect, "type") or "nextPage") in
                    ("nextPage", "oddPage", "evenPage"))
        first, last = pages.span(p, before=before, after=after)
        images += sum(1 for _ in p.iter(_w("drawing"), _w("pict")))
        text = " ".join(_text_of(p).split()) if level is not None else _text_of(p).strip()
        if not text or toc:
            return
        budget.add(text)
        if level is not None:
            title = title or (text if level == 0 else "")
            blocks.append(Block("heading", text, level=level, page=first, page_end=last))
        else:
            blocks.append(Block("para", f"- {text}" if listed else text, page=first, page_end=last))

    def table(tbl: Any) -> None:
        first, last = pages.span(tbl)
        rows = [r for r in _docx_table(tbl) if any(c.strip() for c in r)]
        if not rows:
            return
        if len(rows) == 1 and len(rows[0]) == 1:  # a one-cell table is a framed paragraph
            block = Block("para", rows[0][0].strip(), page=first, page_end=last)
        else:
            block = Block("table", markdown_table(rows), page=first, page_end=last)
        budget.add(block.text)
        blocks.append(block)

    def visit(el: Any) -> None:
        tag = el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""
        if tag == "p":
            paragraph(el)
        elif tag == "tbl":
            table(el)
        elif tag in ("sdt", "customXml", "sdtContent", "ins", "moveTo"):  # content controls (e.g. a TOC) and wrappers
            for child in el:
                visit(child)

    for el in _body_elements(zf, main):
        visit(el)
    if not blocks:
        if images:
            raise Unreadable("image-only", "no text, only images (scanned pages?); OCR them to index the file")
        raise Unreadable("empty", "no text")
    if not pages.breaks:
        for b in blocks:
            b.page = b.page_end = None
    else:
        for b in blocks:
            b.page_end = b.page_end if b.page_end != b.page else None
    return Parsed(title=title or _core_title(zf), blocks=blocks, pages=pages.page if pages.breaks else 0)
