"""Sieve's DSPy signatures, one per module. Docstrings are the instructions; optimizers rewrite them."""

from signatures.answerer import Answerer
from signatures.grader import Grader
from signatures.judge import Judge
from signatures.rewriter import Rewriter

__all__ = ["Answerer", "Grader", "Judge", "Rewriter"]
