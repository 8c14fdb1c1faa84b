"""Why did an item fail? One diagnosis per failed eval record, read off its trace.

A record fails when an answerable item is not answered correctly (refused, judged wrong, or the agent
crashed) or an unanswerable item is answered. Diagnoses, checked in this order:

- ``agent error``            the agent raised; the record holds the exception.
- ``grader false negative``  a grade step was shown a gold chunk and said not relevant.
- ``rewrite loop``           all rewrites were used and a retrieval after a rewrite returned chunks already
                             seen (the rewriter went in circles), without ever finding gold.
- ``retrieval miss``         no retrieval ever returned a gold chunk.
- ``grader false positive``  a grade step accepted context without a gold chunk (for unanswerable items:
                             any acceptance), and the agent answered from it.
- ``generation error``       the answerer was shown a gold chunk (or gold is unknown) and still answered wrongly.
- ``no refusal path``        an unanswerable item answered with reflection off (the baseline cannot refuse).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag.eval.metrics import hit_ids, trace_hits, with_duplicates

KINDS = ("agent error", "grader false negative", "rewrite loop", "retrieval miss", "grader false positive",
         "generation error", "no refusal path")


def is_failure(record: Mapping[str, Any]) -> bool:
    if record.get("status") == "error":
        return True
    s = record["scores"]
    if s["should_refuse"]:
        return s["answered"]
    return s["refused"] or s["judged_correct"] is False


def diagnose(record: Mapping[str, Any]) -> dict[str, str] | None:
    """``{"kind", "detail"}`` for a failed record, None when it did not fail (or cannot be judged)."""
    if not is_failure(record):
        return None
    if record.get("status") == "error":
        return {"kind": "agent error", "detail": str(record.get("error") or "the agent raised")}
    steps = record["prediction"]["trace"]["steps"]
    hits = [s.get("hits") or [] for s in steps if s["node"] == "retrieve"]
    gold = with_duplicates(record.get("gold_ids") or [], trace_hits(steps))
    grades = [(i, s) for i, s in enumerate(steps, 1) if s["node"] == "grade"]
    retrieved = [{i for h in step for i in hit_ids(h)} for step in hits]
    s = record["scores"]

    if s["should_refuse"]:
        accepted = [i for i, g in grades if g.get("verdict")]
        if accepted:
            return {"kind": "grader false positive",
                    "detail": f"unanswerable, but grade step {accepted[0]} accepted {_ids(steps[accepted[0] - 1])}"}
        return {"kind": "no refusal path", "detail": "unanswerable item answered; reflection is off, so nothing can refuse"}

    for i, g in grades:
        missed = gold & set(g.get("shown_ids") or [])
        if missed and not g.get("verdict"):
            return {"kind": "grader false negative",
                    "detail": f"grade step {i} was shown gold {sorted(missed)} and said not relevant"}
    if gold and not any(gold & r for r in retrieved):
        if s.get("used_all_rewrites") and _circled(retrieved):
            return {"kind": "rewrite loop",
                    "detail": f"used all {s['max_rewrites']} rewrites; retrievals repeated chunks already seen, never gold"}
        return {"kind": "retrieval miss", "detail": f"no retrieval returned a gold chunk {sorted(gold)}"}
    if s["refused"]:  # gold unknown, or gold retrieved but never shown to a grader that rejected it
        return {"kind": "retrieval miss" if not gold else "grader false negative",
                "detail": "refused; the item has no gold chunks to say more" if not gold
                else "refused although a retrieval returned gold"}
    answer = next((st for st in steps if st["node"] == "answer"), None)
    shown = set(answer.get("shown_ids") or []) if answer else set()
    if gold and not gold & shown:
        accepted = [i for i, g in grades if g.get("verdict")]
        if accepted:
            return {"kind": "grader false positive",
                    "detail": f"grade step {accepted[-1]} accepted {_ids(steps[accepted[-1] - 1])}, none of them gold"}
        return {"kind": "retrieval miss", "detail": f"answered from {sorted(shown)}; gold {sorted(gold)} not among them"}
    reason = (record.get("judge") or {}).get("reason") or ""
    where = f"shown gold {sorted(gold & shown)}" if gold else "gold unknown"
    return {"kind": "generation error", "detail": f"judged wrong ({where}): {reason}".rstrip(": ")}


def _ids(step: Mapping[str, Any]) -> list[str]:
    return list(step.get("chosen_ids") or step.get("shown_ids") or [])


def _circled(retrieved: list[set[str]]) -> bool:
    """Did a retrieval after the first return only chunks an earlier retrieval had returned?"""
    seen: set[str] = set()
    for i, ids in enumerate(retrieved):
        if i and ids and ids <= seen:
            return True
        seen |= ids
    return False
