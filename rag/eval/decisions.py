"""Each decision of the agent scored on its own: the one definition that ``rag eval`` pools over a run
(rag.eval.agent_metrics) and ``rag compile`` uses as its per-example metric (optimize.roles).

``gold`` is the set of gold chunk ids of the question (empty for an unanswerable one).

    used_ids          the passages a grade step passed on to the answerer: none when the verdict is "not
                      relevant" (whatever ids the grader listed), the listed ids that were shown when it is
                      "relevant", and every shown passage when it said "relevant" without a usable id
    grade_confusion   set level: one prediction per grade step, positive = the shown context holds at least one
                      gold chunk; chunk level: one prediction per shown chunk, predicted = in ``used_ids``,
                      actual = gold
    grader_score      one grade step: 0.6 x set-level agreement + 0.4 x chunk-level F1 of ``used_ids``
    rewrite_succeeded after a rewrite: the next grade passed and the next retrieval held a gold chunk
    answer_score      one answer: mean of judged correct, judged faithful, and citations valid (at least one
                      valid citation and no invalid one)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

SET_WEIGHT, CHUNK_WEIGHT = 0.6, 0.4


def used_ids(verdict: bool, shown: Sequence[str], chosen: Iterable[str]) -> list[str]:
    """What the agent answered from after this grade step (rag.agent.module.Sieve._grade), in shown order."""
    if not verdict:
        return []
    listed = set(chosen)
    picked = [c for c in shown if c in listed]
    return picked or list(shown)


def confusion() -> dict[str, int]:
    return {"tp": 0, "fp": 0, "fn": 0, "tn": 0}


def add(conf: dict[str, int], predicted: bool, actual: bool) -> None:
    conf[("t" if predicted == actual else "f") + ("p" if predicted else "n")] += 1


def grade_confusion(verdict: bool, shown: Sequence[str], chosen: Iterable[str],
                    gold: set[str]) -> tuple[dict[str, int], dict[str, int]]:
    """One grade step at set level (one prediction) and chunk level (one per shown chunk, scored on ``used_ids``)."""
    set_conf, chunk_conf = confusion(), confusion()
    add(set_conf, bool(verdict), bool(gold & set(shown)))
    used = set(used_ids(verdict, shown, chosen))
    for cid in shown:
        add(chunk_conf, cid in used, cid in gold)
    return set_conf, chunk_conf


def f1(conf: Mapping[str, int]) -> float:
    """F1 of a confusion; 1.0 when there was nothing to find and nothing was claimed."""
    tp, fp, fn = conf["tp"], conf["fp"], conf["fn"]
    return 1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def grader_score(verdict: bool, shown: Sequence[str], chosen: Iterable[str], gold: set[str]) -> float:
    """Score of one grade step in [0, 1] (1 = the right verdict and exactly the gold chunks used)."""
    set_conf, chunk_conf = grade_confusion(verdict, shown, chosen, gold)
    return SET_WEIGHT * (set_conf["tp"] + set_conf["tn"]) + CHUNK_WEIGHT * f1(chunk_conf)


def rewrite_succeeded(next_verdict: bool | None, next_retrieved: Iterable[str], gold: set[str]) -> bool:
    """A rewrite succeeded when the grade after it passed and the retrieval after it held a gold chunk."""
    return bool(next_verdict) and bool(gold & set(next_retrieved))


def citations_ok(valid: int, invalid: int) -> bool:
    return valid > 0 and invalid == 0


def answer_score(correct: bool, faithful: bool, valid_citations: int, invalid_citations: int) -> float:
    """Score of one answer in [0, 1]: judged correct, judged faithful, citations valid, one third each."""
    return (float(bool(correct)) + float(bool(faithful)) + float(citations_ok(valid_citations, invalid_citations))) / 3
