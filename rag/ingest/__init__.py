"""Documents in: the built-in corpus and folders of files (``corpus``), one text or HTML file read (``textfile``),
PDF and Word readers (``pdf``, ``docx``, with their shared types in ``readers``), and structure-aware chunking
(``chunking``).

Nothing is imported here, so importing one module stays cheap.
"""

__all__ = ["chunking", "corpus", "jsonl", "pdf", "readers", "textfile", "word"]
