"""Two runs compared item by item: is a difference real, or within noise?

Both runs must hold the same golden items (two configurations, or uncompiled vs compiled). Each metric below
is a per-item outcome; only items both runs scored count, so the test is paired. 0/1 outcomes are tested
with the exact McNemar test, others with the paired bootstrap (interval) and the sign-flip test (p-value),
both in rag.stats.intervals. The verdict is plain words: "no detectable difference at n=12 (p=0.62)".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rag.stats.intervals import compare_paired


def _ok(rec: Mapping[str, Any]) -> bool:
    return rec.get("status") == "ok"


def _right(rec: Mapping[str, Any]) -> float | None:
    """1 when the agent did the right thing: refused an unanswerable item, answered an answerable one correctly
    (judged); an error is wrong; an unjudged answer is left out."""
    s = rec["scores"]
    if not _ok(rec):
        return 0.0
    if rec["should_refuse"]:
        return float(s["refused"])
    if s["refused"]:
        return 0.0
    return None if s.get("judged_correct") is None else float(s["judged_correct"])


def _e2e(rec: Mapping[str, Any]) -> float | None:
    return None if rec["should_refuse"] else _right(rec)


def _e2e_overlap(rec: Mapping[str, Any]) -> float | None:
    """Answerable items: 1 when answered and right by reference overlap (rag.eval.overlap), no judge needed."""
    if rec["should_refuse"]:
        return None
    if not _ok(rec) or rec["scores"].get("refused"):
        return 0.0
    right = rec["scores"].get("overlap_correct")
    return None if right is None else float(right)


def _refused(want_refuse: bool) -> Callable[[Mapping[str, Any]], float | None]:
    def value(rec: Mapping[str, Any]) -> float | None:
        if bool(rec["should_refuse"]) != want_refuse:
            return None
        return float(bool(rec["scores"].get("refused"))) if _ok(rec) else 0.0
    return value


def _score(key: str) -> Callable[[Mapping[str, Any]], float | None]:
    def value(rec: Mapping[str, Any]) -> float | None:
        v = rec["scores"].get(key) if _ok(rec) else None
        return None if v is None else float(v)
    return value


def _grader(rec: Mapping[str, Any]) -> float | None:
    xs = rec["scores"].get("grader_scores") if _ok(rec) else None
    return sum(xs) / len(xs) if xs else None


def _data(key: str) -> Callable[[Mapping[str, Any]], float | None]:
    """A data-route outcome of the item (rag.eval.data_metrics.score_data); None where it has none: no tables,
    no gold for it, or an error before the route ran."""
    def value(rec: Mapping[str, Any]) -> float | None:
        d = (rec["scores"].get("data") or {}) if _ok(rec) else {}
        v = d.get(key)
        return None if v is None else float(v)
    return value


def _routed_right(rec: Mapping[str, Any]) -> float | None:
    d = (rec["scores"].get("data") or {}) if _ok(rec) else {}
    return float(d["route"] == d["route_gold"]) if d.get("routed") and d.get("route_gold") else None


# (key, label, per-item value; None = the item does not count for this metric)
PAIRED: tuple[tuple[str, str, Callable[[Mapping[str, Any]], float | None]], ...] = (
    ("right", "Right decision (correct answer, or refusal when due)", _right),
    ("e2e_accuracy", "End-to-end correct (answerable items)", _e2e),
    ("e2e_overlap_accuracy", "End-to-end right by reference overlap (answerable items, no model)", _e2e_overlap),
    ("correct_refusal_rate", "Refused (unanswerable items)", _refused(True)),
    ("false_refusal_rate", "Refused (answerable items)", _refused(False)),
    ("grader_score", "Grader score (mean per item)", _grader),
    ("hit_at_k", "Hit@k (first retrieval)", _score("hit_at_k")),
    ("recall_at_k", "Recall@k (first retrieval)", _score("recall_at_k")),
    ("mrr_at_k", "MRR@k (first retrieval)", _score("mrr_at_k")),
    ("steps", "Steps per query", _score("steps")),
    ("latency_ms", "Latency per query (ms)", _score("latency_ms")),
    ("tokens_in", "Tokens in per query", _score("tokens_in")),
    ("routing_accuracy", "Routed right (docs / data / both)", _routed_right),
    ("sql_execution_accuracy", "SQL returned the gold rows", _data("exec_correct")),
    ("key_fact_accuracy", "Key facts in the answer (no model)", _data("key_facts_ok")),
    ("unanswerable_caught", "Unanswerable refused or flagged", _data("caught")),
)


def compare_records(records_a: Sequence[Mapping[str, Any]], records_b: Sequence[Mapping[str, Any]],
                    name_a: str = "A", name_b: str = "B") -> list[dict[str, Any]]:
    """One row per metric of PAIRED: n, means, difference (b - a) with its 95% interval, test, p, verdict.
    A metric no shared item counts for is left out."""
    a = {r["id"]: r for r in records_a}
    b = {r["id"]: r for r in records_b}
    shared = [i for i in a if i in b]
    rows = []
    for key, label, value in PAIRED:
        pairs = [(value(a[i]), value(b[i])) for i in shared]
        pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
        if not pairs:
            continue
        c = compare_paired([x for x, _ in pairs], [y for _, y in pairs], name_a, name_b)
        rows.append({"metric": key, "label": label, **c.to_dict()})
    return rows


def _num(x: float | None, key: str) -> str:
    if x is None:
        return "—"
    return f"{x:,.0f}" if key in ("latency_ms", "tokens_in") else f"{x:.3f}"


def render(rows: Sequence[Mapping[str, Any]], name_a: str, name_b: str) -> list[str]:
    """Markdown table lines for ``compare_records`` rows."""
    if not rows:
        return [f"{name_a} and {name_b} share no scored item: nothing to compare.", ""]
    out = [f"| Metric | n | {name_a} | {name_b} | difference [95% CI] | test | p | verdict |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        k = r["metric"]
        diff = f"{_num(r['diff'], k)} [{_num(r['lo'], k)}, {_num(r['hi'], k)}]" if r["diff"] is not None else "—"
        flips = f" ({r['only_a']} vs {r['only_b']} discordant)" if r.get("only_a") is not None else ""
        out.append(f"| {r['label']} | {r['n']} | {_num(r['mean_a'], k)} | {_num(r['mean_b'], k)} | {diff} | "
                   f"{r['test']}{flips} | {r['p']:.3g} | {r['verdict']} |")
    return out + [""]
