"""Documents in: the built-in corpus and folders of files (``corpus``), one text or HTML file read (``textfile``),
PDF and Word readers (``pdf``, ``word``, with their shared types in ``readers``), a document's metadata
(``metadata``), JSON lines with file:line errors (``jsonl``), and structure-aware chunking (``chunking``).

Nothing is imported here, so importing one module stays cheap.
"""

__all__ = ["chunking", "corpus", "jsonl", "metadata", "pdf", "readers", "textfile", "word"]
