"""PDF files -> structured blocks (headings, paragraphs, tables), each with its pages (the types are in
:mod:`rag.ingest.readers`).

The reader streams: a PDF is parsed one page at a time (pdfplumber over pdfminer.six, which reads the file by
seeking, never whole; each page's parsed objects are dropped before the next). The text kept is bounded by
``max_chars`` (the ``max_file_mb`` setting): a file whose text grows past it is skipped.

What is kept of the structure:

* **headings**: the outline (bookmarks) when the file has one, each entry matched to its line on its destination
  page (or placed where the destination points when no line matches); otherwise short, stand-alone lines set in a
  font clearly larger than the body text (level 1 at >= 1.5x the body size, 2 at >= 1.25x, 3 at >= 1.12x; the
  body size is the commonest character size so far).
* **tables** are found from their ruling lines (pdfplumber's table finder); one that runs on at the top of the
  next page with the same columns is joined to it (a repeated header row is dropped).
* **pages**: a PDF has them exactly.

Text is read in lines top to bottom (pdfplumber's text lines), so a page set in two columns reads across both
columns line by line; paragraphs are rebuilt from the vertical gaps between lines.
"""

from __future__ import annotations

import contextlib
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.ingest.readers import (
    Block,
    Parsed,
    Unreadable,
    _Budget,
    _norm,
    _quiet_parsers,
    _short,
    markdown_table,
    page_ranges,
)


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

