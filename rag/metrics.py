"""Retrieval metrics over one ranked list (stand-in: the retrieval branch owns this module; drop at merge).

All take the ranked list best-first and a cut-off ``k``. Callers skip items with no gold.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def recall_at_k(ranked_ids: Sequence[str], gold: Collection[str], k: int) -> float:
    """|gold ∩ top-k| / |gold|."""
    gold = set(gold)
    if not gold:
        raise ValueError("recall_at_k needs at least one gold id; skip items with no gold")
    return len(gold & set(ranked_ids[:k])) / len(gold)


def mrr_at_k(ranked_ids: Sequence[str], gold: Collection[str], k: int) -> float:
    """1 / rank of the first gold id within the top k, else 0."""
    gold = set(gold)
    for rank, cid in enumerate(ranked_ids[:k], 1):
        if cid in gold:
            return 1.0 / rank
    return 0.0


def hit_at_k(ranked_ids: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 if any gold id is in the top k, else 0.0."""
    return 1.0 if set(gold) & set(ranked_ids[:k]) else 0.0


def needle_recall(ranked_texts: Sequence[str], needles: Collection[str], k: int) -> float:
    """Share of needles that occur verbatim in at least one of the top-k texts."""
    if not needles:
        raise ValueError("needle_recall needs at least one needle; skip items without evidence")
    top = ranked_texts[:k]
    return sum(1 for n in needles if any(n in t for t in top)) / len(needles)
