"""Word (.docx) files -> structured blocks (headings, paragraphs, tables), each with its pages (the types are in
:mod:`rag.ingest.readers`).

The reader streams: a .docx's main XML part is read from the ZIP package in 64 KiB pieces with lxml's pull
parser, each top-level paragraph or table handed to python-docx's element classes and freed once read
(python-docx's own ``Document()`` would load every part of the package, images included, into memory). The text
kept is bounded by ``max_chars`` (the ``max_file_mb`` setting): a file whose text grows past it is skipped.

What is kept of the structure:

* **headings**: paragraph styles named "Title" (level 0) and "Heading N" (level N), or any style or paragraph
  with an outline level, inherited along ``basedOn``; table-of-contents entries ("TOC N" styles) are dropped.
* **tables**: a DOCX table's merged cells are repeated as empty cells so every row has the grid's width.
* **pages**: a DOCX has no fixed pages: Word records where its pages fell when it last laid the file out
  (``lastRenderedPageBreak``) and those are used; a file with none (written by other tools) is paginated by its
  hard page breaks, "page break before" paragraphs and new-page section breaks; a file with neither gets no page
  numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag.ingest.readers import OLE_MAGIC, Block, Parsed, Unreadable, _Budget, _quiet_parsers, _short, markdown_table

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
