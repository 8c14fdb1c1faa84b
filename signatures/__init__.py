"""Sieve's DSPy signatures, one per module. Docstrings are the instructions; optimizers rewrite them."""

from signatures.answerer import Answerer
from signatures.category import CategoryChooser
from signatures.expander import Expander
from signatures.grader import Grader
from signatures.hyde import HypotheticalPassage
from signatures.judge import Judge
from signatures.reranker import Reranker
from signatures.rewriter import Rewriter

__all__ = ["Answerer", "CategoryChooser", "Expander", "Grader", "HypotheticalPassage", "Judge", "Reranker", "Rewriter"]
