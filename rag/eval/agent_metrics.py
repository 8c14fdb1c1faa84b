"""Agent metrics: every decision of a run, scored against the golden set.

Two pure functions. ``score_item`` turns one item's trace into per-item facts (counts, flags, the first
retrieval's scores); ``summarize`` aggregates a list of those into metrics, each with its 95% interval and n.
A metric that cannot be computed is ``None`` and ``why[name]`` says why. Each decision is scored by the one
definition in rag.eval.decisions, which ``rag compile`` also uses per example. ``gold`` = the item's gold chunk ids;
its gold is *known* for unanswerable items (empty by definition) and answerable items with a gold chunk.

Grader (items whose gold is known)
  set level     one prediction per grade step: predicted = the verdict; actual = the shown context holds
                at least one gold chunk. precision = TP/(TP+FP), recall = TP/(TP+FN), pooled over steps.
  chunk level   one prediction per shown chunk of each grade step: predicted = the agent used it (``used_ids``:
                nothing after a rejection, every shown chunk after "relevant" without ids); actual = it is gold.
  score         mean over grade steps of ``grader_score``, the metric ``rag compile`` optimizes the grader on.
Refusal         correct-refusal rate = refused unanswerable / unanswerable questions; false-refusal rate =
                refused answerable / answerable questions (answerable = vague + answerable). An item whose
                agent errored was not refused; the error rate is reported beside them.
Rewrites        success rate = rewrites after which the next grade passed AND the next retrieval held a gold
                chunk / all rewrites on items whose gold is known (a rewrite of an unanswerable question cannot
                succeed); rewrites per answerable item; steps per query (every trace step) mean and p95;
                loop rate = share of items (reflection on) that used all ``max_rewrites``.
Retrieval       on the FIRST retrieval only, cut at k: Recall@k, MRR@k, hit@k (items with gold), needle
                recall (items with evidence strings).
Answers         correctness = judged correct / judged answered answerable items; faithfulness = judged
                faithful / judged answered items; citation validity = valid / (valid + invalid) citations;
                answer score = mean ``answer_score`` of judged answered answerable items (compile's answerer
                metric); end-to-end accuracy = correct answers / answerable items (refusals, errors = wrong).
Overlap         no model: reference F1 = mean token F1 of answered answerable items against the reference answer
                (rag.eval.overlap); overlap correctness = share of them with F1 >= rag.eval.overlap.F1_CORRECT; end-to-end
                overlap accuracy = such answers / answerable items. Computed with or without a judge.
Data route      routing accuracy, SQL execution accuracy, validity and corrections, guard rejections, the critic's
                flag rate, unanswerable caught, key-fact accuracy: rag.eval.data_metrics (index with tables only).
Ops             latency p50/p95 per query (sum of its steps) and per node (per step); tokens and cost per
                query. A cached step is charged ``original_latency_ms`` when the harness knows it, and
                counted in ``cached_step_share``. error rate = items whose agent raised / items.
Intervals       ``ci[name] = {lo, hi, n, unit, items, method}``: each metric is pooled from per-item
                contributions (rag.eval.pooled): Wilson for a share of items; a bootstrap over items (which keeps
                an item's steps together) for means and percentiles; the wider of the two for pooled counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag.eval.data_metrics import add_data_metrics, route_groups, score_data
from rag.eval.decisions import answer_score, confusion, f1, grade_confusion, grader_score, rewrite_succeeded
from rag.eval.metrics import hit_at_k, hits_recall, mrr_at_k, needle_recall, trace_hits, with_duplicates
from rag.eval.overlap import F1_CORRECT, token_f1
from rag.eval.pooled import Pooled
from rag.stats.intervals import percentile
from rag.usage.latency import LM_NODES  # one list of the nodes that call an LM

__all__ = ["LM_NODES", "f1", "grade_confusion", "intervals", "percentile", "rescore", "score_item", "step_latency", "summarize"]


def step_latency(step: Mapping[str, Any]) -> float:
    if step.get("cached") and step.get("original_latency_ms") is not None:
        return float(step["original_latency_ms"])
    return float(step.get("latency_ms") or 0.0)


def score_item(item: Any, prediction: Mapping[str, Any] | None, gold: set[str], *, k: int,
               max_rewrites: int | None = None, judge: Mapping[str, Any] | None = None,
               chunk_text: Mapping[str, str] | None = None, error: str | None = None) -> dict[str, Any]:
    """Per-item facts for ``summarize``. ``prediction`` is ``prediction_to_dict(pred)`` (None when the agent failed)."""
    gold_known = bool(item.should_refuse) or bool(gold)
    base: dict[str, Any] = {"id": item.id, "type": item.type, "should_refuse": bool(item.should_refuse),
                            "has_gold": bool(gold), "gold_known": gold_known, "has_evidence": bool(item.evidence),
                            "k": k, "max_rewrites": max_rewrites, "status": "error" if prediction is None else "ok",
                            "error": error, "refused": False, "answered": False, "data": score_data(item, prediction)}
    if prediction is None:
        return base
    steps = list(prediction["trace"]["steps"])
    # a chunk with the same words as a gold one, that retrieval kept in its place (rag.retrieval.retriever, dedupe), is gold too
    gold = with_duplicates(gold, trace_hits(steps))
    grades = [s for s in steps if s["node"] == "grade"]
    rewrites = [i for i, s in enumerate(steps) if s["node"] == "rewrite"]
    answered = not prediction["refused"]

    grade_set = grade_chunk = grader_scores = None
    if gold_known:
        grade_set, grade_chunk, grader_scores = confusion(), confusion(), []
        for g in grades:
            args = (bool(g.get("verdict")), g.get("shown_ids") or [], g.get("chosen_ids") or [], gold)
            for total, one in zip((grade_set, grade_chunk), grade_confusion(*args)):
                for key in total:
                    total[key] += one[key]
            grader_scores.append(grader_score(*args))

    successes = sum(_rewrite_succeeded(steps, i, gold) for i in rewrites) if gold_known else None

    retrieval: dict[str, float | None] = {"recall_at_k": None, "mrr_at_k": None, "hit_at_k": None, "needle_recall": None}
    first = next((s for s in steps if s["node"] == "retrieve"), None)
    if first is not None:
        ranked = [h["chunk_id"] for h in first.get("hits") or []]
        if gold:
            retrieval.update(recall_at_k=hits_recall(first.get("hits") or [], gold), mrr_at_k=mrr_at_k(ranked, gold, k),
                             hit_at_k=hit_at_k(ranked, gold, k))
        if item.evidence and chunk_text is not None:
            retrieval["needle_recall"] = needle_recall([chunk_text.get(c, "") for c in ranked], item.evidence, k)

    correct = faithful = None
    if answered and judge is not None:
        correct = bool(judge.get("correct")) if not item.should_refuse else None
        faithful = bool(judge.get("faithful"))
    e2e = None if item.should_refuse else bool(answered and correct)
    reference = str(getattr(item, "reference_answer", "") or "")
    overlap = token_f1(prediction["answer"], reference) if answered and reference and not item.should_refuse else None
    valid = len(prediction.get("citations") or []) if answered else 0
    invalid = len(prediction.get("invalid_citations") or []) if answered else 0

    by_node: dict[str, list[float]] = {}
    for s in steps:  # an LM node that made no LM call (a grade the subject shortcut skipped) is timed apart
        node = s["node"] if s["node"] not in LM_NODES or s.get("model") or s.get("cached") else f"{s['node']} (no LM call)"
        by_node.setdefault(node, []).append(step_latency(s))
    lm_steps = [s for s in steps if s["node"] in LM_NODES and s.get("model")]
    return {**base, "refused": bool(prediction["refused"]), "answered": answered,
            "n_grade_steps": len(grades), "grade_set": grade_set, "grade_chunk": grade_chunk,
            "grader_scores": grader_scores, "rewrites": len(rewrites), "rewrite_successes": successes,
            "steps": len(steps),
            "used_all_rewrites": (len(rewrites) >= max_rewrites) if (max_rewrites and grades) else None,
            **retrieval, "judged_correct": correct, "judged_faithful": faithful, "e2e_correct": e2e,
            "reference_f1": overlap, "overlap_correct": None if overlap is None else overlap >= F1_CORRECT,
            "answer_score": answer_score(correct, faithful, valid, invalid) if correct is not None else None,
            "citations_valid": valid, "citations_invalid": invalid,
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
    return rewrite_succeeded(grade.get("verdict"), [h["chunk_id"] for h in retrieve.get("hits") or []], gold)


def rescore(record: Mapping[str, Any]) -> dict[str, Any]:
    """``score_item`` again for a stored eval record, with the current definitions (for runs written by an older
    Sieve). Needle recall needs chunk texts, which a record does not hold: it keeps the stored value."""
    from types import SimpleNamespace

    old = record.get("scores") or {}
    item = SimpleNamespace(id=record["id"], type=record["type"], should_refuse=bool(record["should_refuse"]),
                           evidence=list(record.get("evidence") or []),
                           reference_answer=record.get("reference_answer") or "", meta=record.get("data_gold") or {})
    verdict = record.get("judge")
    new = score_item(item, record.get("prediction"), set(record.get("gold_ids") or []), k=old.get("k") or 4,
                     max_rewrites=old.get("max_rewrites"), error=record.get("error"),
                     judge=verdict if verdict and "error" not in verdict else None)
    if "needle_recall" in new:
        new["needle_recall"] = old.get("needle_recall")
    return new


def _metrics(scores: Sequence[Mapping[str, Any]]) -> Pooled:
    """Every metric as per-item contributions (one entry per item of ``scores``, in order), pooled."""
    ok = [s["status"] == "ok" for s in scores]
    m = Pooled(len(scores))

    def per(f: Any, where: Any = lambda s: True) -> list[Any]:
        """``f(score)`` for ok items where ``where`` holds, None for the others."""
        return [f(s) if good and where(s) else None for s, good in zip(scores, ok)]

    def num_den(pairs: list[Any]) -> tuple[list[float], list[float]]:
        return [p[0] if p else 0.0 for p in pairs], [p[1] if p else 0.0 for p in pairs]

    no_grades = not any(s.get("n_grade_steps") for s, good in zip(scores, ok) if good)
    no_grade_reason = "no grade steps: reflection off" if any(ok) else "no items ran"
    for level, unit in (("set", "grade steps"), ("chunk", "graded chunks")):
        confs = per(lambda s, level=level: s.get(f"grade_{level}"), lambda s, level=level: bool(s.get(f"grade_{level}")))
        if no_grades:
            reason_p = reason_r = no_grade_reason
        elif not any(confs):
            reason_p = reason_r = "no grade steps on items with known gold"
        elif level == "set":
            reason_p, reason_r = "the grader never said relevant", "no graded context contained a gold chunk"
        else:
            reason_p, reason_r = "the agent used no shown chunk (every verdict was not relevant)", "no shown chunk was gold"
        m.ratio(f"grader_{level}_precision", *num_den([(c["tp"], c["tp"] + c["fp"]) if c else None for c in confs]),
                unit, reason_p)
        m.ratio(f"grader_{level}_recall", *num_den([(c["tp"], c["tp"] + c["fn"]) if c else None for c in confs]),
                unit, reason_r)
    m.ratio("grader_score", *num_den(per(lambda s: (sum(s["grader_scores"]), len(s["grader_scores"])),
                                         lambda s: bool(s.get("grader_scores")))),
            "grade steps", no_grade_reason if no_grades else "no grade steps on items with known gold", kind="mean")

    # refusals and errors: every item of its kind counts (an errored item was not refused)
    m.share("correct_refusal_rate", [s.get("refused") if s["should_refuse"] else None for s in scores],
            "no unanswerable items")
    m.share("false_refusal_rate", [None if s["should_refuse"] else s.get("refused") for s in scores],
            "no answerable items")
    m.share("error_rate", [not good for good in ok], "no items")

    m.ratio("rewrite_success_rate", *num_den(per(lambda s: (s["rewrite_successes"], s["rewrites"]),
                                                 lambda s: s.get("rewrite_successes") is not None)),
            "rewrites", no_grade_reason if no_grades else "no rewrites on items with known gold")
    m.mean("rewrites_per_answerable", per(lambda s: s["rewrites"], lambda s: not s["should_refuse"]), "items",
           "no answerable items")
    m.mean("steps_mean", per(lambda s: s["steps"]), "items", "no items ran")
    m.pct("steps_p95", per(lambda s: s["steps"]), 95, "items", "no items ran")
    m.share("loop_rate", per(lambda s: s["used_all_rewrites"]), no_grade_reason if no_grades else "max_rewrites is 0")

    for name in ("recall_at_k", "mrr_at_k"):
        m.mean(name, per(lambda s, name=name: s[name]), "items", "no items with gold chunks")
    m.share("hit_at_k", per(lambda s: s["hit_at_k"]), "no items with gold chunks")
    m.mean("needle_recall", per(lambda s: s["needle_recall"]), "items", "no items with evidence strings")

    judged = per(lambda s: True, lambda s: s["judged_faithful"] is not None)
    any_answered = any(per(lambda s: s["answered"], lambda s: s["answered"]))
    no_judge = "no answered items" if not any_answered else "no answers were judged (judge off)"
    m.share("answer_correctness", per(lambda s: s["judged_correct"], lambda s: s["judged_faithful"] is not None),
            no_judge if not any(judged) else "no answered answerable items")
    m.share("faithfulness", per(lambda s: s["judged_faithful"]), no_judge)
    m.mean("answer_score", per(lambda s: s.get("answer_score")), "items",
           no_judge if not any(judged) else "no answered answerable items")
    m.ratio("citation_validity", *num_den(per(lambda s: (s["citations_valid"], s["citations_valid"] + s["citations_invalid"]))),
            "citations", "no answered items" if not any_answered else "answers cited nothing")
    if any_answered and not any(judged):
        m.put_none("e2e_accuracy", "items", "no answers were judged (judge off)")
    else:
        m.share("e2e_accuracy", [None if s["should_refuse"] else bool(s.get("e2e_correct")) for s in scores],
                "no answerable items")

    m.mean("reference_f1", per(lambda s: s.get("reference_f1")), "items", "no answered answerable items with a reference")
    m.share("overlap_correctness", per(lambda s: s.get("overlap_correct")),
            "no answered answerable items with a reference")
    m.share("e2e_overlap_accuracy", [None if s["should_refuse"] else bool(s.get("overlap_correct")) for s in scores],
            "no answerable items")

    lat = per(lambda s: s["latency_ms"])
    m.pct("latency_p50_ms", lat, 50, "items", "no items ran")
    m.pct("latency_p95_ms", lat, 95, "items", "no items ran")
    for name, key in (("tokens_in_per_query", "tokens_in"), ("tokens_out_per_query", "tokens_out"),
                      ("cost_per_query", "cost")):
        m.mean(name, per(lambda s, key=key: s[key]), "items", "no items ran")
    m.ratio("cached_step_share", *num_den(per(lambda s: (s["cached_steps"], s["lm_steps"]))), "LM steps", "no LM steps")
    add_data_metrics(m, scores, per)
    return m


def intervals(scores: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """95% interval and n of every computed metric of ``scores`` (rag.eval.pooled: Wilson or a bootstrap over items)."""
    return _metrics(scores).intervals()


def summarize(scores: Sequence[Mapping[str, Any]], *, by_type: bool = True, with_intervals: bool = True) -> dict[str, Any]:
    """Aggregate ``score_item`` outputs: ``{"n", "counts", "metrics", "why", "ci", "latency_by_node", "by_type"}``."""
    ok = [s for s in scores if s["status"] == "ok"]
    m = _metrics(scores)
    nodes: dict[str, list[float]] = {}
    for s in ok:
        for node, values in s["latency_by_node"].items():
            nodes.setdefault(node, []).extend(values)
    lm_steps = sum(s["lm_steps"] for s in ok)
    out: dict[str, Any] = {
        "n": len(scores),
        "counts": {"items": len(scores), "ok": len(ok), "errors": len(scores) - len(ok),
                   "answerable": sum(not s["should_refuse"] for s in scores),
                   "unanswerable": sum(bool(s["should_refuse"]) for s in scores),
                   "answered": sum(s["answered"] for s in ok), "judged": sum(s["judged_faithful"] is not None for s in ok),
                   "lm_steps": lm_steps, "cached_steps": sum(s["cached_steps"] for s in ok)},
        "metrics": m.values, "why": m.why,
        "latency_by_node": {n: {"n": len(v), "p50_ms": percentile(v, 50), "p95_ms": percentile(v, 95)}
                            for n, v in sorted(nodes.items())},
    }
    if with_intervals:
        out["ci"] = m.intervals()
    if by_type:
        types = sorted({s["type"] for s in scores})
        out["by_type"] = {t: summarize([s for s in scores if s["type"] == t], by_type=False,
                                       with_intervals=with_intervals) for t in types}
        routes = route_groups(scores)  # an index with tables: the same figures per gold route (docs, data, both)
        if routes:
            out["by_route"] = {r: summarize(group, by_type=False, with_intervals=with_intervals)
                               for r, group in routes.items()}
    return out
