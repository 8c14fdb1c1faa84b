"""Evaluation runs as pandas tables, for the notebooks in ``notebooks/`` (which hold no logic of their own).

``load_runs`` (rag.runset) finds the runs: ``$SIEVE_RUNS``, else the latest run of each config under
``$SIEVE_HOME/runs``, or the run directories / folders of runs given. Every table has one row per item, step,
metric, ... and plain columns, so ``df.query``/``groupby`` work on it. Comparing two programs (compiled
artifacts, flips between runs) is ``rag.compare``; plots are ``rag.plots``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from rag.agent_metrics import _step_latency, grade_confusion, percentile
from rag.diagnose import KINDS, diagnose
from rag.errors import InputError
from rag.report import ROWS, fmt
from rag.runset import ENV_RUNS, Run, RunSet, default_paths, load_runs, as_list as _runs
from rag.trace import Trace

__all__ = ["ENV_RUNS", "Run", "RunSet", "default_paths", "load_runs", "items_frame", "steps_frame", "metric_values",
           "metric_table", "grader_confusion", "refusal_outcomes", "failures", "failure_counts", "latency_by_node",
           "render_trace", "render_failures", "record", "outcome", "is_right"]


# ---------------------------------------------------------------- per item, per step


def outcome(record: Mapping[str, Any]) -> str:
    """``error``, ``refused``, ``correct``, ``wrong``, ``answered (unjudged)``; an unanswerable item is right when refused."""
    if record.get("status") == "error":
        return "error"
    s = record["scores"]
    if s["refused"]:
        return "refused"
    if s["should_refuse"]:
        return "wrong"
    return {True: "correct", False: "wrong"}.get(s.get("judged_correct"), "answered (unjudged)")


def is_right(record: Mapping[str, Any]) -> bool | None:
    """Did the agent do the right thing? Refusing an unanswerable item, answering an answerable one correctly.
    None when an answer was not judged."""
    o = outcome(record)
    if record["should_refuse"]:
        return o == "refused"
    return None if o == "answered (unjudged)" else o == "correct"


ITEM_SCORES = ("refused", "answered", "judged_correct", "judged_faithful", "e2e_correct", "steps", "rewrites",
               "n_grade_steps", "used_all_rewrites", "recall_at_k", "mrr_at_k", "hit_at_k", "needle_recall",
               "citations_valid", "citations_invalid", "latency_ms", "tokens_in", "tokens_out", "cost",
               "lm_steps", "cached_steps")


def items_frame(runs: RunSet | Run | Sequence[Run]) -> pd.DataFrame:
    """One row per item per run: identity, outcome, the per-item scores and the diagnosis of a failure."""
    rows = []
    for run in _runs(runs):
        for r in run.records:
            s, pred, d = r["scores"], r.get("prediction") or {}, diagnose(r)
            rows.append({"config": run.name, "id": r["id"], "type": r["type"], "split": r.get("split"),
                         "should_refuse": r["should_refuse"], "status": r["status"], "outcome": outcome(r),
                         "right": is_right(r), **{k: s.get(k) for k in ITEM_SCORES},
                         "diagnosis": d["kind"] if d else None, "diagnosis_detail": d["detail"] if d else None,
                         "question": r["question"], "answer": pred.get("answer"), "wall_ms": r.get("wall_ms")})
    return pd.DataFrame(rows)


def steps_frame(runs: RunSet | Run | Sequence[Run]) -> pd.DataFrame:
    """One row per trace step: node, query, ids, verdict, latency (cached steps charged their measured latency)."""
    rows = []
    for run in _runs(runs):
        for r in run.records:
            gold = set(r.get("gold_ids") or [])
            steps = ((r.get("prediction") or {}).get("trace") or {}).get("steps") or []
            for i, st in enumerate(steps, 1):
                hits = [h["chunk_id"] for h in st.get("hits") or []]
                shown = list(st.get("shown_ids") or [])
                rows.append({"config": run.name, "id": r["id"], "type": r["type"], "step": i, "node": st["node"],
                             "query": st.get("query"), "hit_ids": hits, "shown_ids": shown,
                             "chosen_ids": list(st.get("chosen_ids") or []), "verdict": st.get("verdict"),
                             "reason": st.get("reason"), "rewrite": st.get("rewrite"),
                             "gold_seen": bool(gold & set(hits or shown)),
                             "latency_ms": _step_latency(st), "measured_latency_ms": st.get("latency_ms"),
                             "tokens_in": int(st.get("tokens_in") or 0), "tokens_out": int(st.get("tokens_out") or 0),
                             "cost": float(st.get("cost") or 0.0), "model": st.get("model"),
                             "cached": bool(st.get("cached"))})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- tables across runs


def metric_values(runs: RunSet | Sequence[Run]) -> pd.DataFrame:
    """Metrics (rows, rag.report order) by run (columns) as numbers; NaN where a run could not compute one."""
    runs = _runs(runs)
    data = {r.name: [r.summary["metrics"].get(key) for key, _, _ in ROWS] for r in runs}
    return pd.DataFrame(data, index=[key for key, _, _ in ROWS], dtype=float)


def metric_table(runs: RunSet | Sequence[Run]) -> pd.DataFrame:
    """The metric table for reading: formatted values, ``n/a (why)`` where a run could not compute a metric."""
    runs = _runs(runs)
    data = {}
    for r in runs:
        m, why = r.summary["metrics"], r.summary.get("why", {})
        data[r.name] = [fmt(m.get(key), kind, why.get(key)).replace("—", "n/a") for key, _, kind in ROWS]
    table = pd.DataFrame(data, index=[label for _, label, _ in ROWS])
    table.index.name = "metric"
    return table


def grader_confusion(runs: RunSet | Sequence[Run], level: str = "set", by: str | None = "type") -> pd.DataFrame:
    """Grader confusion counts (tp, fp, fn, tn) with precision/recall, per run (and per ``by`` column).

    ``level="set"``: one prediction per grade step (positive = the shown context holds a gold chunk);
    ``level="chunk"``: one per shown chunk. Only items whose gold is known count (as in rag.agent_metrics)."""
    if level not in ("set", "chunk"):
        raise InputError(f'level must be "set" or "chunk", got {level!r}')
    if by not in (None, "type"):
        raise InputError(f'by must be "type" or None, got {by!r}')
    rows = []
    for run in _runs(runs):
        for r in run.records:
            if r["status"] != "ok" or not r["scores"].get("gold_known"):
                continue
            gold = set(r.get("gold_ids") or [])
            for st in r["prediction"]["trace"]["steps"]:
                if st["node"] != "grade":
                    continue
                conf = grade_confusion(bool(st.get("verdict")), st.get("shown_ids") or [], st.get("chosen_ids") or [],
                                       gold)[0 if level == "set" else 1]
                rows.append({"config": run.name, "type": r["type"], **conf})
    keys = ["config"] + ([by] if by else [])
    cols = ["tp", "fp", "fn", "tn"]
    if not rows:
        return pd.DataFrame(columns=keys + cols + ["n", "precision", "recall"])
    table = pd.DataFrame(rows).groupby(keys, sort=True)[cols].sum().reset_index()
    table["n"] = table[cols].sum(axis=1)
    table["precision"] = table.tp / (table.tp + table.fp).where(lambda x: x > 0)
    table["recall"] = table.tp / (table.tp + table.fn).where(lambda x: x > 0)
    return table


def refusal_outcomes(runs: RunSet | Sequence[Run]) -> pd.DataFrame:
    """Per run and question type: how many items were refused, answered correctly/wrongly, unjudged, errored."""
    items = items_frame(runs)
    table = pd.crosstab([items.config, items.type], items.outcome)
    for col in ("refused", "correct", "wrong", "answered (unjudged)", "error"):
        if col not in table:
            table[col] = 0
    table = table[["refused", "correct", "wrong", "answered (unjudged)", "error"]]
    table.columns.name = None
    table["n"] = table.sum(axis=1)
    table["refusal_rate"] = table.refused / table.n
    return table.reset_index()


def failures(runs: RunSet | Sequence[Run], diagnosis: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Failed items with their diagnosis, ordered by diagnosis (rag.diagnose.KINDS), then run and id."""
    wanted = [diagnosis] if isinstance(diagnosis, str) else diagnosis
    bad = [k for k in wanted or [] if k not in KINDS]
    if bad:
        raise InputError(f"unknown diagnosis {bad}; one of: {', '.join(KINDS)}")
    items = items_frame(runs)
    if items.empty:
        return items
    out = items[items.diagnosis.notna()]
    if wanted:
        out = out[out.diagnosis.isin(wanted)]
    order = {k: i for i, k in enumerate(KINDS)}
    out = out.assign(_o=out.diagnosis.map(order)).sort_values(["_o", "config", "id"]).drop(columns="_o")
    return out[["diagnosis", "config", "id", "type", "outcome", "diagnosis_detail", "question", "answer"]] \
        .reset_index(drop=True)


def failure_counts(runs: RunSet | Sequence[Run]) -> pd.DataFrame:
    """Failures per diagnosis (rows, KINDS order, only those that occur) and run (columns)."""
    f = failures(runs)
    names = [r.name for r in _runs(runs)]
    if f.empty:
        return pd.DataFrame(columns=names)
    table = pd.crosstab(f.diagnosis, f.config).reindex(columns=names, fill_value=0)
    return table.reindex([k for k in KINDS if k in table.index])


def latency_by_node(runs: RunSet | Sequence[Run]) -> pd.DataFrame:
    """Per run and node: steps, latency p50/p95/mean (ms), tokens per step, share of cached steps."""
    steps = steps_frame(runs)
    rows = []
    for (config, node), g in steps.groupby(["config", "node"], sort=True):
        lat = g.latency_ms.tolist()
        rows.append({"config": config, "node": node, "n": len(g), "p50_ms": percentile(lat, 50),
                     "p95_ms": percentile(lat, 95), "mean_ms": sum(lat) / len(lat),
                     "tokens_in": g.tokens_in.mean(), "tokens_out": g.tokens_out.mean(),
                     "cached_share": g.cached.mean()})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- one trace


def render_trace(record: Mapping[str, Any], *, max_answer_chars: int = 600) -> str:
    """One item step by step: query, retrieved ids with scores (``*`` = gold), verdict and reason, rewrite,
    answer and citations, then the judge's verdict and the diagnosis. The totals line is rag.trace's."""
    gold = set(record.get("gold_ids") or [])
    d = diagnose(record)
    lines = [f"[{record.get('config', '?')}] {record['id']} ({record['type']}): {record['question']}",
             f"reference: {record.get('reference_answer') or '-'}",
             f"gold chunks: {', '.join(sorted(gold)) or '(none)'}   outcome: {outcome(record)}"]
    if d:
        lines.append(f"diagnosis: {d['kind']}: {_short(d['detail'], max_answer_chars)}")
    pred = record.get("prediction")
    if not pred:
        lines.append(f"agent error: {_short(record.get('error'), max_answer_chars)}")
        return "\n".join(lines)
    trace = pred["trace"]
    for i, st in enumerate(trace["steps"], 1):
        cost = f"[{_step_latency(st):.0f} ms, {st.get('tokens_in') or 0}+{st.get('tokens_out') or 0} tok" \
               f"{', cached' if st.get('cached') else ''}]"
        node = st["node"]
        if node == "retrieve":
            lines.append(f"{i}. retrieve  query={st.get('query')!r} {cost}")
            for h in st.get("hits") or []:
                mark = "*" if h["chunk_id"] in gold else " "
                score = h.get("score")
                lines.append(f"     {mark} #{h.get('rank', '?')} {h['chunk_id']}"
                             + (f"  score={score:.4f}" if isinstance(score, (int, float)) else ""))
        elif node == "grade":
            verdict = "RELEVANT" if st.get("verdict") else "NOT RELEVANT"
            lines.append(f"{i}. grade     {verdict} {cost}")
            lines.append(f"     shown={_marked(st.get('shown_ids'), gold)} chosen={_marked(st.get('chosen_ids'), gold)}")
            lines.append(f"     reason: {_short(st.get('reason'), max_answer_chars)}")
        elif node == "rewrite":
            lines.append(f"{i}. rewrite   {st.get('query')!r} -> {st.get('rewrite')!r} {cost}")
        else:
            text = _short(st.get("answer"), max_answer_chars)
            lines.append(f"{i}. {node:<9} {cost}")
            if node == "answer":
                lines.append(f"     shown={_marked(st.get('shown_ids'), gold)} cited={_marked(st.get('chosen_ids'), gold)}")
            elif st.get("reason"):
                lines.append(f"     reason: {_short(st.get('reason'), max_answer_chars)}")
            lines.append(f"     {text!r}")
        lines.extend(f"     note: {n}" for n in st.get("notes") or [])
    if pred.get("invalid_citations"):
        lines.append(f"invalid citations (dropped): {pred['invalid_citations']}")
    judge = record.get("judge")
    if judge:
        lines.append("judge: " + ", ".join(f"{k}={judge[k]}" for k in ("correct", "faithful") if k in judge)
                     + (f"; {_short(judge['reason'], max_answer_chars)}" if judge.get("reason") else "")
                     + (f"; error: {_short(judge['error'], max_answer_chars)}" if judge.get("error") else ""))
    lines.append(Trace.from_dict(trace).render().splitlines()[-1])
    return "\n".join(lines)


def _short(text: Any, limit: int) -> str:
    """One line of at most ``limit`` characters (LM parse errors quote whole responses)."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _marked(ids: Iterable[str] | None, gold: set[str]) -> str:
    return "[" + ", ".join(("*" if i in gold else "") + i for i in ids or []) + "]"


def record(runs: RunSet, config: str, item_id: str) -> dict[str, Any]:
    """The raw record of ``item_id`` in run ``config`` (for ``render_trace``), tagged with the run name."""
    return {**runs[config].record(item_id), "config": config}


def render_failures(runs: RunSet | Sequence[Run], diagnosis: str | Sequence[str] | None = None,
                    per_kind: int = 3) -> str:
    """Failure cases grouped by diagnosis, at most ``per_kind`` traces each (``render_trace``), with counts."""
    f = failures(runs, diagnosis)
    if f.empty:
        return "no failures" + (f" diagnosed {diagnosis}" if diagnosis else "") + "\n"
    by_name = {r.name: r for r in _runs(runs)}
    out = []
    for kind, group in f.groupby("diagnosis", sort=False):
        out.append(f"===== {kind}: {len(group)} failure(s)" + (f", first {per_kind} shown" if len(group) > per_kind else ""))
        for row in group.head(per_kind).itertuples():
            out += ["", render_trace({**by_name[row.config].record(row.id), "config": row.config}), ""]
    return "\n".join(out).rstrip() + "\n"
