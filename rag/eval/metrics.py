"""Evaluation metrics as pure functions, plus the reports that average them over a golden set.

Sections: retrieval (this part); agent metrics follow below it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rag.eval.golden import GoldenItem, check_gold_in_index, collapse, gold_chunk_ids

# =============================================================================================
# Retrieval metrics
# =============================================================================================
#
# ``ranked_ids`` is a best-first list of chunk ids; ``gold`` the set of relevant ids; ``k`` >= 1.
# Duplicate ids in a ranking count once (first occurrence).


def _top(ranked: Sequence[str], k: int) -> list[str]:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    out: list[str] = []
    for x in ranked:
        if x not in out:
            out.append(x)
        if len(out) == k:
            break
    return out


def recall_at_k(ranked_ids: Sequence[str], gold: Iterable[str], k: int) -> float:
    """|gold in top k| / |gold|; NaN when there is no gold (such items are skipped by reports)."""
    gold = set(gold)
    if not gold:
        return math.nan
    return len(gold.intersection(_top(ranked_ids, k))) / len(gold)


def mrr_at_k(ranked_ids: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1 / rank of the first gold id within the top k, 0.0 if none; NaN when there is no gold."""
    gold = set(gold)
    if not gold:
        return math.nan
    for rank, x in enumerate(_top(ranked_ids, k), 1):
        if x in gold:
            return 1.0 / rank
    return 0.0


def hit_at_k(ranked_ids: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 if any gold id is in the top k else 0.0; NaN when there is no gold."""
    gold = set(gold)
    if not gold:
        return math.nan
    return 1.0 if gold.intersection(_top(ranked_ids, k)) else 0.0


def hit_ids(hit: Any) -> list[str]:
    """The ids a retrieved hit brings: its chunk's and those of the chunks with the same words that retrieval left
    out for it (``duplicates``; rag.retrieval.retriever). ``hit`` is a :class:`~rag.retrieval.retriever.Hit` or its trace dict."""
    if isinstance(hit, Mapping):
        return [hit["chunk_id"], *(hit.get("duplicates") or [])]
    return [hit.chunk_id, *(getattr(hit, "duplicates", None) or [])]


def with_duplicates(gold: Iterable[str], hits: Iterable[Any]) -> set[str]:
    """``gold`` plus every id of a hit that brings a gold id: chunks with the same words are equally gold, so
    leaving out a repeat changes no retrieval or grader score."""
    gold = set(gold)
    for hit in hits:
        ids = hit_ids(hit)
        if gold.intersection(ids):
            gold.update(ids)
    return gold


def hits_recall(hits: Iterable[Any], gold: Iterable[str]) -> float:
    """Recall of the ids ``hits`` bring (:func:`hit_ids`, duplicates included) against ``gold``; NaN without gold."""
    brought = [i for h in hits for i in hit_ids(h)]
    return recall_at_k(brought, gold, max(len(brought), 1))


def trace_hits(steps: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every hit of a trace's retrieve steps (dicts), in order: what :func:`with_duplicates` reads for a run record."""
    return [h for s in steps if s["node"] == "retrieve" for h in s.get("hits") or []]


def needle_recall(ranked_texts: Sequence[str], needles: Iterable[str], k: int) -> float:
    """Share of ``needles`` found verbatim (case-sensitive, whitespace runs collapsed) in the first k texts.
    NaN when there are no needles."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    wanted = [collapse(n) for n in needles if collapse(n)]
    if not wanted:
        return math.nan
    context = "\n".join(collapse(t) for t in ranked_texts[:k])
    return sum(1 for n in wanted if n in context) / len(wanted)


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if not math.isnan(v)]
    return round(sum(values) / len(values), 4) if values else None


def _intervals(rows: list[dict[str, Any]], k: int) -> dict[str, dict[str, Any]]:
    """95% interval and n per metric: Wilson for hit@k and all-needles (shares of items), else a bootstrap of the mean."""
    from rag.stats.intervals import mean_interval, wilson

    out = {}
    for metric in (f"recall@{k}", f"mrr@{k}", f"hit@{k}", f"needle_recall@{k}", f"all_needles@{k}"):
        source = f"needle_recall@{k}" if metric.startswith("all_needles") else metric
        values = [r[source] for r in rows if not math.isnan(r[source])]
        if metric.startswith("all_needles"):
            values = [float(v == 1.0) for v in values]
        if not values:
            continue
        share = metric.startswith(("hit@", "all_needles"))
        lo_hi = wilson(int(sum(values)), len(values)) if share else mean_interval(values)
        out[metric] = {"lo": round(lo_hi[0], 4), "hi": round(lo_hi[1], 4), "n": len(values),
                       "method": "wilson" if share else "bootstrap over items"}
    return out


def retrieval_report(items: Sequence[GoldenItem], retriever: Any, k: int = 4, mode: str | None = None,
                     per_item: bool = True, strict_gold: bool = False) -> dict[str, Any]:
    """Recall@k, MRR@k, hit@k (over items with gold chunks) and needle recall@k (over items with
    ``evidence``), averaged, each with its 95% interval and n in ``ci``; items with no gold at all are skipped
    and counted. A hit's left-out duplicates (``Hit.duplicates``, the same words) count as retrieved with it
    (:func:`with_duplicates`), so leaving out a repeat never lowers a score. Retrieval runs with
    ``retriever.search(question, k=k, mode=mode)``. Gold ids the index does not hold are warned about first
    (:func:`rag.eval.golden.check_gold_in_index`; ``strict_gold``: an InputError)."""
    mode = mode or retriever.mode
    chunks = retriever.index.chunks
    check_gold_in_index(items, (c.id for c in chunks), strict=strict_gold)
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    latencies: list[float] = []
    for item in items:
        gold = gold_chunk_ids(item, chunks)
        if not gold and not item.evidence:
            skipped.append(item.id)
            continue
        started = time.perf_counter()
        hits = retriever.search(item.question, k=k, mode=mode)
        latencies.append(time.perf_counter() - started)
        ids = [h.chunk_id for h in hits]
        gold = with_duplicates(gold, hits)
        rows.append({
            "id": item.id, "type": item.type, "gold": sorted(gold), "retrieved": ids,
            f"recall@{k}": hits_recall(hits, gold), f"mrr@{k}": mrr_at_k(ids, gold, k),
            f"hit@{k}": hit_at_k(ids, gold, k),
            f"needle_recall@{k}": needle_recall([h.text for h in hits], item.evidence, k),
        })
    report: dict[str, Any] = {
        "mode": mode, "k": k, "items": len(items), "scored": len(rows), "skipped_no_gold": len(skipped),
        "index": str(getattr(retriever.index, "dir", "")), "fingerprint": getattr(retriever.index, "fingerprint", None),
    }
    for metric in (f"recall@{k}", f"mrr@{k}", f"hit@{k}", f"needle_recall@{k}"):
        report[metric] = _mean([r[metric] for r in rows])
    needles = [r for r in rows if not math.isnan(r[f"needle_recall@{k}"])]
    report[f"all_needles@{k}"] = round(sum(r[f"needle_recall@{k}"] == 1.0 for r in needles) / len(needles), 4) if needles else None
    report["ci"] = _intervals(rows, k)
    report["latency_ms_mean"] = round(1000 * sum(latencies) / len(latencies), 2) if latencies else None
    if per_item:
        report["per_item"] = [{key: (None if isinstance(v, float) and math.isnan(v) else v) for key, v in r.items()} for r in rows]
        report["skipped_ids"] = skipped
    return report
