"""What each rewrite bought: per rewrite depth, the items that reached it, how they ended, and the agent seconds
spent from it on.

The agent decodes greedily, so with the LM cache off a run bounded at ``max_rewrites = k - 1`` takes the same
steps as this one up to the k-th rewrite and refuses there (a refusal costs no LM call). The items answered after
the k-th rewrite are what that bound would give up, and the seconds from it on are what it would save: the
``max_rewrites`` setting measured on a recorded run, without running it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rag.eval.agent_metrics import step_latency

__all__ = ["rewrite_depths"]


def rewrite_depths(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per rewrite depth reached by a finished item of ``records`` (eval run records), in depth order:
    ``depth``; ``reached`` (items); ``unanswerable`` (of them, items that should be refused); ``answered`` (of them,
    answerable items the agent then answered; ``answered_keys`` holds their (config, id), for hand labels);
    ``seconds`` (agent seconds from that rewrite on, cached steps charged their measured latency) and ``share``
    (of all agent seconds of the run's finished items)."""
    rows: dict[int, dict[str, Any]] = {}
    total_ms = 0.0
    for rec in records:
        if rec.get("status") != "ok":
            continue
        steps = ((rec.get("prediction") or {}).get("trace") or {}).get("steps") or []
        total_ms += sum(step_latency(step) for step in steps)
        answered = not rec.get("should_refuse") and not (rec.get("scores") or {}).get("refused")
        rewrites = [i for i, step in enumerate(steps) if step.get("node") == "rewrite"]
        for depth, at in enumerate(rewrites, 1):
            row = rows.setdefault(depth, {"depth": depth, "reached": 0, "unanswerable": 0, "answered_keys": [],
                                          "seconds": 0.0})
            row["reached"] += 1
            row["unanswerable"] += bool(rec.get("should_refuse"))
            if answered:
                row["answered_keys"].append((str(rec.get("config", "")), str(rec["id"])))
            row["seconds"] += sum(step_latency(step) for step in steps[at:]) / 1000
    for row in rows.values():
        row["answered"] = len(row["answered_keys"])
        row["share"] = row["seconds"] * 1000 / total_ms if total_ms else None
    return [rows[depth] for depth in sorted(rows)]
