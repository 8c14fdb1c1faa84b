"""Uncertainty for every figure: intervals and paired tests (``intervals``), and two runs compared item by item
(``paired``). Pure functions, no I/O.

Nothing is imported here, so importing one module stays cheap.
"""

__all__ = ["intervals", "paired"]
