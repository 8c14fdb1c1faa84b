"""Curating a golden set for any index: planning seeds and types (:mod:`rag.curate.plan`), drafting items with pooled
gold labels (:mod:`rag.curate.draft`, checked by :mod:`rag.curate.seedcheck` and :mod:`rag.curate.absent`) and
reviewing them by hand or by a model (:mod:`rag.curate.review`); loading and scoring a set is :mod:`rag.eval.golden`."""

__all__ = ["absent", "draft", "plan", "review", "seedcheck"]
