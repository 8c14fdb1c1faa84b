"""Evaluation runs as pandas tables, for the notebooks in ``notebooks/`` (which hold no logic of their own).

``load_runs`` (rag.report.runset) finds the runs: ``$SIEVE_RUNS``, else the latest run of each config under
``$SIEVE_HOME/runs``, or the run directories / folders of runs given. Every table has one row per item, step,
metric, ... and plain columns, so ``df.query``/``groupby`` work on it. Every rate comes with its 95% interval
and n (Wilson for shares of items, a bootstrap over items otherwise; rag.stats.intervals). Comparing two programs
(compiled artifacts, paired tests, flips between runs) is ``rag.report.compare``; plots are ``rag.report.plots``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rag.errors import InputError
from rag.eval.agent_metrics import grade_confusion, intervals, percentile, step_latency
from rag.eval.diagnose import KINDS, diagnose
from rag.report.markdown import DATA_ROWS, ROWS, fmt_ci, metric_rows
from rag.report.runset import ENV_RUNS, Run, RunSet, default_paths, load_runs
from rag.report.runset import as_list as _runs
from rag.report.trace_view import is_right, outcome, render_trace
from rag.stats.intervals import bootstrap, wilson

__all__ = ["ENV_RUNS", "Run", "RunSet", "default_paths", "load_runs", "load_runs_or_empty", "items_frame", "critic_flags",
           "steps_frame", "metric_values", "metric_intervals", "metric_table", "grader_confusion", "refusal_outcomes",
           "failures", "failure_counts", "latency_by_node", "render_trace", "render_failures", "record", "outcome",
           "is_right"]

NOTHING_TO_SHOW = ("No eval runs to show in {where}. Make some first, e.g.\n"
                   "  rag index\n"
                   "  rag eval --config baseline --split test --limit 12\n"
                   "  rag eval --config full --split test --limit 12\n"
                   "then run this notebook again (or point SIEVE_RUNS at a run folder).")


def load_runs_or_empty(paths: Any = None) -> RunSet:
    """``load_runs``; on a fresh machine (no runs yet) it prints what to run and returns an empty RunSet, which
    every table here turns into an empty table."""
    try:
        return load_runs(paths)
    except InputError:
        where = ", ".join(str(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths or default_paths()))
        print(NOTHING_TO_SHOW.format(where=where))
        return RunSet([])


def _intervals(run: Run) -> dict[str, Any]:
    """The run's intervals from summary.json, or computed from its records (older summaries lack them)."""
    return run.summary.get("ci") or intervals([r["scores"] for r in run.records])


# ---------------------------------------------------------------- per item, per step


ITEM_SCORES = ("refused", "answered", "judged_correct", "judged_faithful", "e2e_correct", "answer_score", "steps",
               "rewrites", "n_grade_steps", "used_all_rewrites", "recall_at_k", "mrr_at_k", "hit_at_k", "needle_recall",
               "citations_valid", "citations_invalid", "latency_ms", "tokens_in", "tokens_out", "cost",
               "lm_steps", "cached_steps")


ITEM_COLUMNS = ["config", "id", "type", "split", "should_refuse", "status", "outcome", "right", *ITEM_SCORES,
                "diagnosis", "diagnosis_detail", "question", "answer", "wall_ms"]
STEP_COLUMNS = ["config", "id", "type", "step", "node", "query", "hit_ids", "shown_ids", "chosen_ids", "verdict",
                "reason", "rewrite", "gold_seen", "latency_ms", "measured_latency_ms", "tokens_in", "tokens_out",
                "cost", "model", "cached"]


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
    return pd.DataFrame(rows, columns=ITEM_COLUMNS)


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
                             "latency_ms": step_latency(st), "measured_latency_ms": st.get("latency_ms"),
                             "tokens_in": int(st.get("tokens_in") or 0), "tokens_out": int(st.get("tokens_out") or 0),
                             "cost": float(st.get("cost") or 0.0), "model": st.get("model"),
                             "cached": bool(st.get("cached"))})
    return pd.DataFrame(rows, columns=STEP_COLUMNS)


# ---------------------------------------------------------------- tables across runs


def _rows(runs: Sequence[Run]) -> tuple[tuple[str, str, str], ...]:
    """The report's metric rows, with the data route's when a run routed questions (an index with tables)."""
    return metric_rows([r.summary for r in runs])


def metric_values(runs: RunSet | Sequence[Run]) -> pd.DataFrame:
    """Metrics (rows, rag.report.markdown order) by run (columns) as numbers; NaN where a run could not compute one."""
    runs = _runs(runs)
    rows = _rows(runs)
    data = {r.name: [r.summary["metrics"].get(key) for key, _, _ in rows] for r in runs}
    return pd.DataFrame(data, index=[key for key, _, _ in rows], dtype=float)


def metric_intervals(runs: RunSet | Sequence[Run]) -> pd.DataFrame:
    """One row per run and computed metric: value, 95% interval (lo, hi), n and its unit, and the method."""
    rows, runs = [], _runs(runs)
    for r in runs:
        ci = _intervals(r)
        for key, label, _ in _rows(runs):
            value = r.summary["metrics"].get(key)
            if value is None:
                continue
            c = ci.get(key) or {}
            rows.append({"config": r.name, "metric": key, "label": label, "value": value, "lo": c.get("lo"),
                         "hi": c.get("hi"), "n": c.get("n"), "unit": c.get("unit"), "method": c.get("method")})
    return pd.DataFrame(rows, columns=["config", "metric", "label", "value", "lo", "hi", "n", "unit", "method"])


def metric_table(runs: RunSet | Sequence[Run]) -> pd.DataFrame:
    """The metric table for reading: ``value [95% interval] n``, ``n/a (why)`` where a run could not compute one."""
    runs = _runs(runs)
    rows = _rows(runs)
    data = {}
    for r in runs:
        m, why, ci = r.summary["metrics"], r.summary.get("why", {}), _intervals(r)
        data[r.name] = [fmt_ci(m.get(key), kind, why.get(key), ci.get(key)).replace("—", "n/a")
                        for key, _, kind in rows]
    table = pd.DataFrame(data, index=[label for _, label, _ in rows])
    table.index.name = "metric"
    return table


def grader_confusion(runs: RunSet | Sequence[Run], level: str = "set", by: str | None = "type") -> pd.DataFrame:
    """Grader confusion counts (tp, fp, fn, tn) with precision/recall, per run (and per ``by`` column).

    ``level="set"``: one prediction per grade step (positive = the shown context holds a gold chunk);
    ``level="chunk"``: one per shown chunk the agent used. Only items whose gold is known count (as in
    rag.eval.agent_metrics). ``*_lo``/``*_hi``: 95% bootstrap interval over the ``items`` of each row."""
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
                rows.append({"config": run.name, "type": r["type"], "id": r["id"], **conf})
    keys = ["config"] + ([by] if by else [])
    cols = ["tp", "fp", "fn", "tn"]
    extra = ["n", "items", "precision", "precision_lo", "precision_hi", "recall", "recall_lo", "recall_hi"]
    if not rows:
        return pd.DataFrame(columns=keys + cols + extra)
    per_item = pd.DataFrame(rows).groupby(keys + ["id"], sort=True)[cols].sum().reset_index()
    table = per_item.groupby(keys, sort=True)[cols].sum().reset_index()
    table["n"] = table[cols].sum(axis=1)
    table["items"] = per_item.groupby(keys, sort=True).size().values
    table["precision"] = table.tp / (table.tp + table.fp).where(lambda x: x > 0)
    table["recall"] = table.tp / (table.tp + table.fn).where(lambda x: x > 0)

    def pooled(sample: list[dict[str, int]]) -> dict[str, float | None]:
        tp, fp, fn = (sum(c[k] for c in sample) for k in ("tp", "fp", "fn"))
        return {"precision": tp / (tp + fp) if tp + fp else None, "recall": tp / (tp + fn) if tp + fn else None}

    bounds = [bootstrap(g[cols].to_dict("records"), pooled) for _, g in per_item.groupby(keys, sort=True)]
    for name in ("precision", "recall"):
        table[f"{name}_lo"] = [(b.get(name) or (None, None))[0] for b in bounds]
        table[f"{name}_hi"] = [(b.get(name) or (None, None))[1] for b in bounds]
    return table[keys + cols + extra]


def refusal_outcomes(runs: RunSet | Sequence[Run]) -> pd.DataFrame:
    """Per run and question type: how many items were refused, answered correctly/wrongly, unjudged, errored;
    the refusal rate with its 95% Wilson interval (``refusal_lo``, ``refusal_hi``) over ``n`` items."""
    items = items_frame(runs)
    if items.empty:
        return pd.DataFrame(columns=["config", "type", "refused", "correct", "wrong", "answered (unjudged)", "error",
                                     "n", "refusal_rate", "refusal_lo", "refusal_hi"])
    table = pd.crosstab([items.config, items.type], items.outcome)
    for col in ("refused", "correct", "wrong", "answered (unjudged)", "error"):
        if col not in table:
            table[col] = 0
    table = table[["refused", "correct", "wrong", "answered (unjudged)", "error"]]
    table.columns.name = None
    table["n"] = table.sum(axis=1)
    table["refusal_rate"] = table.refused / table.n
    bounds = [wilson(int(k), int(n)) for k, n in zip(table.refused, table.n)]
    table["refusal_lo"], table["refusal_hi"] = [b[0] for b in bounds], [b[1] for b in bounds]
    return table.reset_index()


def by_route(runs: RunSet | Sequence[Run]) -> pd.DataFrame:
    """Per run and gold route (docs, data, both; an index with tables only): n and the data route's main figures,
    ``value [95% interval] n`` as in ``metric_table``. Empty when no run routed questions."""
    from rag.report.markdown import ROUTE_ROWS

    labels = {key: (label, kind) for key, label, kind in (*ROWS, *DATA_ROWS)}
    rows = []
    for r in _runs(runs):
        for route, sub in r.summary.get("by_route", {}).items():
            ci, why = sub.get("ci") or {}, sub.get("why", {})
            rows.append({"config": r.name, "route": route, "n": sub["n"],
                         **{labels[key][0]: fmt_ci(sub["metrics"].get(key), labels[key][1], why.get(key), ci.get(key))
                            .replace("—", "n/a") for key in ROUTE_ROWS}})
    return pd.DataFrame(rows, columns=["config", "route", "n", *(labels[key][0] for key in ROUTE_ROWS)])


def critic_flags(runs: RunSet | Sequence[Run]) -> pd.DataFrame:
    """Per run and critic check: the answers it flagged low_confidence on unanswerable items, and on answerable ones
    with every key fact right (a false flag) or not (rag.eval.data_metrics.flags_by_check). Empty when no run's
    critic flagged an answer, or its runs were made before the trace named the check."""
    from rag.eval.data_metrics import flags_by_check

    rows = [{"config": r.name, "check": check, **counts}
            for r in _runs(runs) for check, counts in flags_by_check([rec["scores"] for rec in r.records]).items()]
    return pd.DataFrame(rows, columns=["config", "check", "unanswerable", "right", "wrong"])


def failures(runs: RunSet | Sequence[Run], diagnosis: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Failed items with their diagnosis, ordered by diagnosis (rag.eval.diagnose.KINDS), then run and id."""
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
    """Per run and node: steps (``n``) over ``items``, latency p50 with its 95% bootstrap interval over items
    (``p50_lo``, ``p50_hi``), p95 and mean (ms), tokens per step, share of cached steps."""
    steps = steps_frame(runs)
    rows = []
    for (config, node), g in (steps.groupby(["config", "node"], sort=True) if not steps.empty else []):
        lat = g.latency_ms.tolist()
        per_item = [x.latency_ms.tolist() for _, x in g.groupby("id", sort=True)]
        lo_hi = bootstrap(per_item, lambda sample: percentile([v for xs in sample for v in xs], 50)) or (None, None)
        rows.append({"config": config, "node": node, "n": len(g), "items": len(per_item),
                     "p50_ms": percentile(lat, 50), "p50_lo": lo_hi[0], "p50_hi": lo_hi[1],
                     "p95_ms": percentile(lat, 95), "mean_ms": sum(lat) / len(lat),
                     "tokens_in": g.tokens_in.mean(), "tokens_out": g.tokens_out.mean(),
                     "cached_share": g.cached.mean()})
    return pd.DataFrame(rows, columns=["config", "node", "n", "items", "p50_ms", "p50_lo", "p50_hi", "p95_ms",
                                       "mean_ms", "tokens_in", "tokens_out", "cached_share"])


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
