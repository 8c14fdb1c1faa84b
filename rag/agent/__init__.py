"""The self-reflective agent: the ``dspy.Module`` and its bounded rewrite loop (``module``), the prompt layout
(``adapter``), the context and citations (``context``), the trace (``trace``), compiled artifacts (``artifacts``)
and assembling a program for a configuration (``program``).

Nothing is imported here, so importing one module stays cheap.
"""

__all__ = ["artifacts", "context", "judging", "module", "program", "trace"]
