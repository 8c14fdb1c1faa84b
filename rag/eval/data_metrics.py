"""Data-route metrics: the router, the SQL writer and the guard, and the grounding critic, scored per item.

Only items whose trace holds a ``route`` step (an index with tables) count; on an index without tables every
metric here is absent and a run's summary is what it was. A golden item labels its route in ``route`` (docs, data
or both), and a data or both item gives ``gold_sql`` with its ``gold_result`` (rows) and ``key_facts``.

  routing accuracy        the route step chose the item's route label / items with a label
  SQL execution accuracy  the statement that ran returned the gold rows / items with a gold result (no statement
                          run = wrong). Rows are compared as a multiset of rows, each row as a multiset of values
                          (column order and names aside), a number equal at the gold value's own precision, text case-folded
  SQL validity            items where a statement ran / items where the SQL writer was asked
  SQL correction rate     items that needed a correction / items where the SQL writer was asked; correction success
                          = of those, the corrected statement ran
  guard rejection rate    statements the guard refused / statements written
  critic flag rate        answers flagged low_confidence / answered items the critic checked
                          (rag report counts the flags per check: flags_by_check)
  unanswerable caught     unanswerable items refused or flagged low_confidence / unanswerable items
  key-fact accuracy       answered answerable items whose answer holds every key fact (digits' thousands
                          separators aside) / answerable items with key facts (a refusal = wrong)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

DATA_KEYS = ("route", "gold_sql", "gold_result", "key_facts")  # the golden fields the data route is scored on


def score_data(item: Any, prediction: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per-item data-route facts for :func:`add_data_metrics` (``routed`` False, with the gold label, when the agent
    did not route: an index without tables, or an item that failed before routing)."""
    steps = list((prediction or {}).get("trace", {}).get("steps", []))
    route = next((s for s in steps if s["node"] == "route"), None)
    meta = getattr(item, "meta", None) or {}
    if prediction is None or route is None:
        return {"routed": False, "route_gold": meta.get("route")}
    sqls = [s for s in steps if s["node"] == "sql"]
    ran = next((s for s in sqls if s.get("result")), None)
    gold = meta.get("gold_result")
    answered = not prediction["refused"]
    facts = [str(f) for f in meta.get("key_facts") or []]
    critiques = [s for s in steps if s["node"] == "critique"]
    return {"routed": True, "route": route.get("route"), "route_gold": meta.get("route"),
            "sql_asked": bool(sqls), "sql_ran": ran is not None, "sql_corrected": len(sqls) > 1,
            "sql_statements": sum(1 for s in sqls if s.get("sql")),
            "guard_rejections": sum(1 for s in sqls if str(s.get("reason") or "").startswith("guard:")),
            "exec_correct": None if gold is None else bool(ran and same_rows(ran["result"]["rows"], gold)),
            "critiqued": any(s["node"] == "critique" for s in steps),
            "low_confidence": bool(prediction.get("low_confidence")),
            "critic_check": (critiques[-1].get("check") or "not recorded") if prediction.get("low_confidence")
            and critiques else None,
            "caught": bool(prediction["refused"] or prediction.get("low_confidence")) if item.should_refuse else None,
            "key_facts_ok": (None if item.should_refuse or not facts
                             else bool(answered and all(_norm(f) in _norm(prediction["answer"]) for f in facts)))}


def add_data_metrics(m: Any, scores: Sequence[Mapping[str, Any]], per: Callable[..., list[Any]]) -> None:
    """Put the data-route metrics into ``m`` (rag.eval.pooled.Pooled) when any item of ``scores`` was routed."""
    if not any((s.get("data") or {}).get("routed") for s in scores):
        return
    d = lambda s: s.get("data") or {}  # noqa: E731

    m.share("routing_accuracy", per(lambda s: d(s)["route"] == d(s)["route_gold"],
                                    lambda s: d(s).get("routed") and d(s).get("route_gold")), "no routed items with a route label")
    m.share("sql_execution_accuracy", per(lambda s: d(s)["exec_correct"], lambda s: d(s).get("exec_correct") is not None),
            "no routed items with a gold result")
    asked = lambda s: bool(d(s).get("sql_asked"))  # noqa: E731
    m.share("sql_validity", per(lambda s: d(s)["sql_ran"], asked), "the SQL writer was never asked")
    m.share("sql_correction_rate", per(lambda s: d(s)["sql_corrected"], asked), "the SQL writer was never asked")
    m.share("sql_correction_success", per(lambda s: d(s)["sql_ran"], lambda s: d(s).get("sql_corrected")),
            "no statement needed a correction")
    pairs = per(lambda s: (d(s)["guard_rejections"], d(s)["sql_statements"]), asked)
    m.ratio("guard_rejection_rate", [p[0] if p else 0.0 for p in pairs], [p[1] if p else 0.0 for p in pairs],
            "statements", "no statements written")
    m.share("critic_flag_rate", per(lambda s: d(s)["low_confidence"], lambda s: d(s).get("critiqued")),
            "the critic checked no answer")
    m.share("unanswerable_caught", per(lambda s: d(s)["caught"], lambda s: d(s).get("caught") is not None),
            "no unanswerable items")
    m.share("key_fact_accuracy", per(lambda s: d(s)["key_facts_ok"], lambda s: d(s).get("key_facts_ok") is not None),
            "no answerable items with key facts")


def flags_by_check(scores: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per critic check (the trace's last critique step: rag.agent.critique), the answers it flagged
    low_confidence: on unanswerable items, and on answerable ones with their key facts right (a false flag) or not;
    {} when none was flagged."""
    found: dict[str, dict[str, int]] = {}
    for s in scores:
        d = s.get("data") or {}
        if not d.get("critic_check"):
            continue
        row = found.setdefault(d["critic_check"], {"unanswerable": 0, "right": 0, "wrong": 0})
        row["unanswerable" if d.get("caught") is not None else "right" if d.get("key_facts_ok") else "wrong"] += 1
    return dict(sorted(found.items()))


def route_groups(scores: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The routed items grouped by their gold route label (docs, data, both; unanswerable items stay in their
    route's group), in that order; {} when no item was routed or none has a label."""
    if not any((s.get("data") or {}).get("routed") for s in scores):
        return {}
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for s in scores:
        gold = (s.get("data") or {}).get("route_gold")
        if gold:
            groups.setdefault(str(gold), []).append(s)
    order = {name: i for i, name in enumerate(("docs", "data", "both"))}
    return dict(sorted(groups.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def same_rows(got: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]]) -> bool:
    """Whether two results hold the same rows, in any order and with the columns in any order; a number matches
    at the gold value's own precision (126.809 is 126.8 when the gold query rounded to one decimal)."""
    if len(got) != len(gold):
        return False
    left = [sorted(map(_cell, row), key=repr) for row in got]
    for row in gold:
        want = sorted(map(_cell, row), key=repr)
        match = next((i for i, have in enumerate(left) if _same_row(have, want)), None)
        if match is None:
            return False
        left.pop(match)
    return True


def _cell(v: Any) -> Any:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v).strip().casefold() if v is not None else None


def _same_row(have: list[Any], want: list[Any]) -> bool:
    if len(have) != len(want):
        return False
    numbers = lambda row: sorted(v for v in row if isinstance(v, float))  # noqa: E731
    texts = lambda row: sorted((v for v in row if not isinstance(v, float)), key=repr)  # noqa: E731
    if texts(have) != texts(want) or len(numbers(have)) != len(numbers(want)):
        return False
    return all(abs(a - b) <= _tolerance(b) for a, b in zip(numbers(have), numbers(want)))


def _tolerance(gold: float) -> float:
    """Half a unit of the gold number's last decimal (at most 2 decimals are read as rounding)."""
    decimals = min(len(repr(gold).split(".")[1].rstrip("0")) if "." in repr(gold) else 0, 6)
    return 0.5 * 10 ** -decimals + 1e-9 if decimals <= 2 else 1e-6 * max(1.0, abs(gold))


def _norm(text: str) -> str:
    """Lower case, thousands separators out of numbers (5,000 -> 5000), whitespace collapsed."""
    import re

    return " ".join(re.sub(r"(?<=\d),(?=\d{3}\b)", "", str(text)).casefold().split())
