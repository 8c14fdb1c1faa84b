"""Reading runs: Markdown reports (``markdown``), uncompiled vs compiled (``compare``), pandas tables for the
notebooks (``analysis``, ``runset``), figures (``plots``), one record read by a person (``trace_view``) and what
each rewrite bought (``rewrite_depth``), and the checks printed on a golden set (``golden_checks``).

Nothing is imported here, so importing one module stays cheap.
"""

__all__ = ["analysis", "compare", "golden_checks", "markdown", "plots", "repeat", "rewrite_depth", "runset", "trace_view"]
