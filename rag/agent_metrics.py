"""Agent metrics: every decision of a run, scored against the golden set.

Two pure functions. ``score_item`` turns one item's trace into per-item facts (counts, flags, the first
retrieval's scores); ``summarize`` aggregates a list of those into metrics. A metric that cannot be computed
is ``None`` and ``why[name]`` says why. Definitions (``gold`` = the item's gold chunk ids):

Grader (only items whose gold is known: unanswerable items, whose gold is empty by definition, and
answerable items with at least one gold chunk)
  set level     one prediction per grade step: predicted = the verdict; actual = the shown context holds
                at least one gold chunk. precision = TP/(TP+FP), recall = TP/(TP+FN), pooled over steps.
  chunk level   one prediction per shown chunk of each grade step: predicted = the grader listed it
                (``chosen_ids``); actual = it is gold. Pooled like the set level.
Refusal         correct-refusal rate = refused unanswerable / unanswerable;
                false-refusal rate = refused answerable / answerable (answerable = vague + answerable).
Rewrites        success rate = rewrites after which the next grade passed AND the next retrieval held a
                gold chunk / rewrites (answerable items with gold only); rewrites per answerable item;
                steps per query (every trace step: retrieve, grade, rewrite, answer/refuse) mean and p95;
                loop rate = share of items (reflection on) that used all ``max_rewrites``.
Retrieval       on the FIRST retrieval only, cut at k: Recall@k, MRR@k, hit@k (items with gold), needle
                recall (items with evidence strings).
Answers         correctness = judged correct / judged answered answerable items; faithfulness = judged
                faithful / judged answered items; citation validity = valid / (valid + invalid) citations;
                end-to-end accuracy = correct answers / answerable items (refusals and errors count as wrong).
Ops             latency p50/p95 per query (sum of its steps) and per node (per step); tokens and cost per
                query. A cached step is charged ``original_latency_ms`` when the harness knows it, and
                counted in ``cached_step_share``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rag.metrics import hit_at_k, mrr_at_k, needle_recall, recall_at_k

LM_NODES = ("grade", "rewrite", "answer")


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), ``q`` in [0, 100]; None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _confusion() -> dict[str, int]:
    return {"tp": 0, "fp": 0, "fn": 0, "tn": 0}


def _add(conf: dict[str, int], predicted: bool, actual: bool) -> None:
    conf[("t" if predicted == actual else "f") + ("p" if predicted else "n")] += 1


def grade_confusion(verdict: bool, shown: Sequence[str], chosen: Sequence[str],
                    gold: set[str]) -> tuple[dict[str, int], dict[str, int]]:
    """One grade step scored at set level (one prediction) and chunk level (one per shown chunk).

    The evaluation harness pools these over a run; the optimizer's grader metric scores them one by one."""
    set_conf, chunk_conf = _confusion(), _confusion()
    _add(set_conf, verdict, bool(gold & set(shown)))
    for cid in shown:
        _add(chunk_conf, cid in set(chosen), cid in gold)
    return set_conf, chunk_conf


def f1(conf: Mapping[str, int]) -> float:
    """F1 of a confusion; 1.0 when there was nothing to find and nothing was claimed."""
    tp, fp, fn = conf["tp"], conf["fp"], conf["fn"]
    return 1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def _step_latency(step: Mapping[str, Any]) -> float:
    if step.get("cached") and step.get("original_latency_ms") is not None:
        return float(step["original_latency_ms"])
    return float(step.get("latency_ms") or 0.0)


def score_item(item: Any, prediction: Mapping[str, Any] | None, gold: set[str], *, k: int,
               max_rewrites: int | None = None, judge: Mapping[str, Any] | None = None,
               chunk_text: Mapping[str, str] | None = None, error: str | None = None) -> dict[str, Any]:
    """Per-item facts for ``summarize``. ``prediction`` is ``prediction_to_dict(pred)`` (None when the agent failed)."""
    base: dict[str, Any] = {"id": item.id, "type": item.type, "should_refuse": bool(item.should_refuse),
                            "has_gold": bool(gold), "has_evidence": bool(item.evidence), "k": k,
                            "max_rewrites": max_rewrites, "status": "error" if prediction is None else "ok",
                            "error": error}
    if prediction is None:
        return base
    steps = list(prediction["trace"]["steps"])
    gold_known = bool(item.should_refuse) or bool(gold)
    grades = [s for s in steps if s["node"] == "grade"]
    rewrites = [i for i, s in enumerate(steps) if s["node"] == "rewrite"]
    answered = not prediction["refused"]

    grade_set = grade_chunk = None
    if gold_known:
        grade_set, grade_chunk = _confusion(), _confusion()
        for g in grades:
            one_set, one_chunk = grade_confusion(bool(g.get("verdict")), g.get("shown_ids") or [],
                                                 g.get("chosen_ids") or [], gold)
            for total, one in ((grade_set, one_set), (grade_chunk, one_chunk)):
                for key in total:
                    total[key] += one[key]

    successes = None
    if gold and not item.should_refuse:
        successes = sum(_rewrite_succeeded(steps, i, gold) for i in rewrites)

    retrieval: dict[str, float | None] = {"recall_at_k": None, "mrr_at_k": None, "hit_at_k": None, "needle_recall": None}
    first = next((s for s in steps if s["node"] == "retrieve"), None)
    if first is not None:
        ranked = [h["chunk_id"] for h in first.get("hits") or []]
        if gold:
            retrieval.update(recall_at_k=recall_at_k(ranked, gold, k), mrr_at_k=mrr_at_k(ranked, gold, k),
                             hit_at_k=hit_at_k(ranked, gold, k))
        if item.evidence and chunk_text is not None:
            retrieval["needle_recall"] = needle_recall([chunk_text.get(c, "") for c in ranked], item.evidence, k)

    correct = faithful = None
    if answered and judge is not None:
        correct = bool(judge.get("correct")) if not item.should_refuse else None
        faithful = bool(judge.get("faithful"))
    e2e = None if item.should_refuse else bool(answered and correct)

    by_node: dict[str, list[float]] = {}
    for s in steps:
        by_node.setdefault(s["node"], []).append(_step_latency(s))
    lm_steps = [s for s in steps if s["node"] in LM_NODES and s.get("model")]
    return {**base, "gold_known": gold_known, "refused": bool(prediction["refused"]), "answered": answered,
            "n_grade_steps": len(grades), "grade_set": grade_set, "grade_chunk": grade_chunk,
            "rewrites": len(rewrites), "rewrite_successes": successes, "steps": len(steps),
            "used_all_rewrites": (len(rewrites) >= max_rewrites) if (max_rewrites and grades) else None,
            **retrieval, "judged_correct": correct, "judged_faithful": faithful, "e2e_correct": e2e,
            "citations_valid": len(prediction.get("citations") or []) if answered else 0,
            "citations_invalid": len(prediction.get("invalid_citations") or []) if answered else 0,
            "latency_ms": sum(sum(v) for v in by_node.values()), "latency_by_node": by_node,
            "tokens_in": sum(int(s.get("tokens_in") or 0) for s in steps),
            "tokens_out": sum(int(s.get("tokens_out") or 0) for s in steps),
            "cost": sum(float(s.get("cost") or 0.0) for s in steps),
            "lm_steps": len(lm_steps), "cached_steps": sum(1 for s in lm_steps if s.get("cached"))}


def _rewrite_succeeded(steps: Sequence[Mapping[str, Any]], at: int, gold: set[str]) -> bool:
    """After the rewrite at ``at``: did the next retrieval hold a gold chunk and the next grade pass?"""
    retrieve = next((s for s in steps[at + 1:] if s["node"] == "retrieve"), None)
    grade = next((s for s in steps[at + 1:] if s["node"] == "grade"), None)
    if retrieve is None or grade is None:
        return False
    return bool(grade.get("verdict")) and bool(gold & {h["chunk_id"] for h in retrieve.get("hits") or []})


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(scores: Sequence[Mapping[str, Any]], *, by_type: bool = True) -> dict[str, Any]:
    """Aggregate ``score_item`` outputs: ``{"n", "counts", "metrics", "why", "latency_by_node", "by_type"}``."""
    ok = [s for s in scores if s["status"] == "ok"]
    errors = len(scores) - len(ok)
    ans = [s for s in ok if not s["should_refuse"]]
    unans = [s for s in ok if s["should_refuse"]]
    m: dict[str, float | None] = {}
    why: dict[str, str] = {}

    def put(name: str, value: float | None, reason: str) -> None:
        m[name] = value
        if value is None:
            why[name] = reason

    no_grades = not any(s["n_grade_steps"] for s in ok)
    for level in ("set", "chunk"):
        conf = _confusion()
        for s in ok:
            for key, v in (s.get(f"grade_{level}") or {}).items():
                conf[key] += v
        if no_grades:
            reason_p = reason_r = "no grade steps: reflection off" if ok else "no items ran"
        elif not any(s.get(f"grade_{level}") for s in ok):
            reason_p = reason_r = "no grade steps on items with known gold"
        elif level == "set":
            reason_p = "the grader never said relevant"
            reason_r = "no graded context contained a gold chunk"
        else:
            reason_p = "the grader never listed a shown chunk id as relevant"
            reason_r = "no shown chunk was gold"
        put(f"grader_{level}_precision", _ratio(conf["tp"], conf["tp"] + conf["fp"]), reason_p)
        put(f"grader_{level}_recall", _ratio(conf["tp"], conf["tp"] + conf["fn"]), reason_r)

    put("correct_refusal_rate", _ratio(sum(s["refused"] for s in unans), len(unans)), "no unanswerable items")
    put("false_refusal_rate", _ratio(sum(s["refused"] for s in ans), len(ans)), "no answerable items")

    eligible = [s for s in ok if s["rewrite_successes"] is not None]
    n_rew = sum(s["rewrites"] for s in eligible)
    put("rewrite_success_rate", _ratio(sum(s["rewrite_successes"] for s in eligible), n_rew),
        "no grade steps: reflection off" if no_grades else "no rewrites on answerable items with gold")
    put("rewrites_per_answerable", _mean([s["rewrites"] for s in ans]), "no answerable items")
    put("steps_mean", _mean([s["steps"] for s in ok]), "no items ran")
    put("steps_p95", percentile([s["steps"] for s in ok], 95), "no items ran")
    looped = [s["used_all_rewrites"] for s in ok if s["used_all_rewrites"] is not None]
    put("loop_rate", _mean([float(x) for x in looped]),
        "no grade steps: reflection off" if no_grades else "max_rewrites is 0")

    for name in ("recall_at_k", "mrr_at_k", "hit_at_k"):
        put(name, _mean([s[name] for s in ok if s[name] is not None]), "no items with gold chunks")
    put("needle_recall", _mean([s["needle_recall"] for s in ok if s["needle_recall"] is not None]),
        "no items with evidence strings")

    judged = [s for s in ok if s["judged_faithful"] is not None]
    answered = [s for s in ok if s["answered"]]
    no_judge = "no answered items" if not answered else "no answers were judged (judge off)"
    put("answer_correctness", _mean([float(s["judged_correct"]) for s in judged if s["judged_correct"] is not None]),
        no_judge if not judged else "no answered answerable items")
    put("faithfulness", _mean([float(s["judged_faithful"]) for s in judged]), no_judge)
    valid, invalid = sum(s["citations_valid"] for s in ok), sum(s["citations_invalid"] for s in ok)
    put("citation_validity", _ratio(valid, valid + invalid),
        "no answered items" if not answered else "answers cited nothing")
    answerable_all = [s for s in scores if not s["should_refuse"]]
    e2e_reason = "no answerable items"
    if answered and not judged:
        e2e_reason = "no answers were judged (judge off)"
    put("e2e_accuracy", None if (answered and not judged) else
        _ratio(sum(bool(s.get("e2e_correct")) for s in answerable_all), len(answerable_all)), e2e_reason)

    lat = [s["latency_ms"] for s in ok]
    put("latency_p50_ms", percentile(lat, 50), "no items ran")
    put("latency_p95_ms", percentile(lat, 95), "no items ran")
    put("tokens_in_per_query", _mean([s["tokens_in"] for s in ok]), "no items ran")
    put("tokens_out_per_query", _mean([s["tokens_out"] for s in ok]), "no items ran")
    put("cost_per_query", _mean([s["cost"] for s in ok]), "no items ran")
    lm_steps = sum(s["lm_steps"] for s in ok)
    put("cached_step_share", _ratio(sum(s["cached_steps"] for s in ok), lm_steps), "no LM steps")
    put("error_rate", _ratio(errors, len(scores)), "no items")

    nodes: dict[str, list[float]] = {}
    for s in ok:
        for node, values in s["latency_by_node"].items():
            nodes.setdefault(node, []).extend(values)
    out: dict[str, Any] = {
        "n": len(scores),
        "counts": {"items": len(scores), "ok": len(ok), "errors": errors, "answerable": len(ans),
                   "unanswerable": len(unans), "answered": len(answered), "judged": len(judged),
                   "lm_steps": lm_steps, "cached_steps": sum(s["cached_steps"] for s in ok)},
        "metrics": m, "why": why,
        "latency_by_node": {n: {"n": len(v), "p50_ms": percentile(v, 50), "p95_ms": percentile(v, 95)}
                            for n, v in sorted(nodes.items())},
    }
    if by_type:
        types = sorted({s["type"] for s in scores})
        out["by_type"] = {t: summarize([s for s in scores if s["type"] == t], by_type=False) for t in types}
    return out
