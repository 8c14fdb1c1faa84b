"""Reading one text file: the ``.md`` / ``.markdown`` / ``.txt`` / ``.rst`` / ``.html`` files that
:func:`rag.ingest.corpus.load_folder` finds (the folder walk, and PDF and Word files, stay in :mod:`rag.ingest.corpus`).

Files that cannot be read as UTF-8 text are skipped with a warning naming them; HTML is turned into Markdown-like
text (headings become ``#`` lines) so the structure-aware chunker sees its sections.
"""

from __future__ import annotations

import codecs
import html
import re
import warnings
from html.parser import HTMLParser
from pathlib import Path

MAX_FILE_BYTES = 20_000_000  # default of the max_file_mb setting: a larger "document" is almost surely not prose
BLOCK_BYTES = 1 << 20  # files are read and decoded in blocks of this size


def _valid_name(name: str) -> str:
    """A path from the file system as valid Unicode: bytes that are not UTF-8 become ``\\xNN``."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _read_text(file: Path, max_bytes: int = MAX_FILE_BYTES, shown: str = "") -> tuple[str | None, str]:
    """(UTF-8 text of ``file``, "") or (None, why) with a warning that names it and says why.

    Read in blocks with an incremental decoder, so a large file is never held twice (bytes and text) and a
    binary or non-UTF-8 file stops at its first bad block."""
    shown = shown or _valid_name(str(file))
    try:
        size = file.stat().st_size
        if size > max_bytes:
            warnings.warn(f"skipping {shown}: {size / 1e6:.1f} MB is over max_file_mb={max_bytes / 1e6:g} (raise it "
                          "with SIEVE_MAX_FILE_MB or max_file_mb in sieve.toml)", stacklevel=3)
            return None, f"over max_file_mb={max_bytes / 1e6:g}"
        decoder = codecs.getincrementaldecoder("utf-8-sig")()
        parts, offset = [], 0
        with file.open("rb") as fh:
            while block := fh.read(BLOCK_BYTES):
                if b"\x00" in block:  # anywhere in the file, not only its start: text never holds NUL bytes
                    warnings.warn(f"skipping {shown}: binary content (NUL bytes), not text", stacklevel=3)
                    return None, "binary"
                if offset + len(block) > max_bytes:  # grew while we read it
                    warnings.warn(f"skipping {shown}: over max_file_mb={max_bytes / 1e6:g}", stacklevel=3)
                    return None, f"over max_file_mb={max_bytes / 1e6:g}"
                try:
                    parts.append(decoder.decode(block))
                except UnicodeDecodeError as exc:
                    warnings.warn(f"skipping {shown}: not valid UTF-8 (byte {offset + exc.start}); convert it with "
                                  "e.g. iconv -t UTF-8", stacklevel=3)
                    return None, "not UTF-8"
                offset += len(block)
            pending = len(decoder.getstate()[0])
            try:
                parts.append(decoder.decode(b"", final=True))
            except UnicodeDecodeError:
                warnings.warn(f"skipping {shown}: not valid UTF-8 (byte {offset - pending}); convert it with e.g. "
                              "iconv -t UTF-8", stacklevel=3)
                return None, "not UTF-8"
    except OSError as exc:
        warnings.warn(f"skipping {shown}: cannot read it ({exc.strerror or exc})", stacklevel=3)
        return None, "unreadable"
    return "".join(parts).replace("\r\n", "\n").replace("\r", "\n"), ""


_MD_H1 = re.compile(r"^\s{0,3}#\s+(.+?)\s*#*\s*$", re.M)
_RST_TITLE = re.compile(r"^(?:([=\-~^*#+\"'`])\1{2,}\n)?(\S[^\n]*)\n([=\-~^*#+\"'`])\3{2,}\s*$", re.M)


def _first_heading(text: str, suffix: str) -> str:
    if suffix in (".md", ".markdown"):
        m = _MD_H1.search(text)
        return m.group(1).strip() if m else ""
    if suffix in (".rst", ".txt"):
        m = _RST_TITLE.search(text)
        return m.group(2).strip() if m else ""
    return ""


class _HTMLToText(HTMLParser):
    """Minimal HTML -> Markdown-ish text: headings become ``#`` lines, blocks become paragraphs, pre stays whole."""

    BLOCKS = {"p", "div", "section", "article", "li", "tr", "br", "table", "ul", "ol", "blockquote", "dd", "dt"}
    SKIP = {"script", "style", "head", "nav", "noscript", "svg"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0
        self.pre = 0
        self.heading: int | None = None
        self.title = ""
        self.in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        if tag in self.SKIP:
            self.skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.heading = int(tag[1])
            self.out.append("\n\n" + "#" * self.heading + " ")
        elif tag == "pre":
            self.pre += 1
            self.out.append("\n\n```\n")
        elif tag in ("td", "th"):
            self.out.append(" | ")
        elif tag in self.BLOCKS:
            self.out.append("\n\n" if tag not in ("br", "li", "tr") else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
        elif re.fullmatch(r"h[1-6]", tag):
            self.heading = None
            self.out.append("\n\n")
        elif tag == "pre":
            self.pre = max(0, self.pre - 1)
            self.out.append("\n```\n\n")
        elif tag in self.BLOCKS:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data
        if self.skip or self.in_title:
            return
        if self.pre:
            self.out.append(data)
        else:
            self.out.append(re.sub(r"\s+", " ", data))


def html_to_text(source: str) -> tuple[str, str]:
    """(title, text) of an HTML page; the text keeps headings as Markdown ``#`` lines."""
    parser = _HTMLToText()
    parser.feed(source)
    parser.close()
    text = "".join(parser.out)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    title = html.unescape(parser.title).strip()
    if not title:
        m = _MD_H1.search(text)
        title = m.group(1).strip() if m else ""
    return title, text
