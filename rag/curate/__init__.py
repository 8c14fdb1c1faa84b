"""Curating a golden set for any index: drafting items with pooled gold labels (:mod:`rag.curate.draft`) and
reviewing them by hand or by a model (:mod:`rag.curate.review`); loading and scoring a set is :mod:`rag.eval.golden`."""

__all__ = ["draft", "review"]
