"""PDF and Word (.docx) files -> structured blocks (headings, paragraphs, tables), each with its pages: what the
two readers share (:mod:`rag.ingest.pdf` reads PDFs, :mod:`rag.ingest.word` Word files).

Both readers stream. The text kept is bounded by ``max_chars`` (the ``max_file_mb`` setting): a file whose text
grows past it is skipped.

What is kept of the structure:

* **headings** become :class:`Block` ``heading`` blocks with a level, so the chunker gives chunks a section path.
* **tables** become one ``table`` block each, as a Markdown table (first row as header), so the chunker keeps a
  table whole when it fits in a chunk.
* **pages**: every block carries its first and last page (1-based).

Files that cannot be read raise :class:`Unreadable` with a short ``reason`` (counted in ``rag index``'s summary)
and a one-line ``detail``: ``encrypted`` (needs a password), ``corrupt`` (not parseable as its format), ``empty``
(no text, no images) and ``image-only`` (scanned pages with no text layer). Pages or parts that fail while the
rest reads are reported in :attr:`Parsed.notes` instead.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field


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

