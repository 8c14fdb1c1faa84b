"""A Markdown report across eval runs: metric table, per-type breakdowns, latency per node, failure cases.

Reads only what ``rag eval`` wrote into each run directory (summary.json, results.jsonl), so reports can be
rebuilt at any time. A metric that a run could not compute shows as ``—`` with the reason. Every figure
carries its 95% interval and n (rag.eval.agent_metrics.intervals); two or more runs are also compared item by
item (rag.stats.paired), so a difference within noise says so.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.agent.trace import Trace
from rag.errors import InputError
from rag.eval.diagnose import KINDS, diagnose
from rag.eval.overlap import F1_CORRECT
from rag.eval.runs import RESULTS, SUMMARY, names_apart, read_records, recompute_summary
from rag.report.rewrite_depth import rewrite_depths

# (metric key, label, format) in table order
ROWS: tuple[tuple[str, str, str], ...] = (
    ("e2e_accuracy", "End-to-end accuracy", "pct"),
    ("answer_correctness", "Answer correctness (judge)", "pct"),
    ("faithfulness", "Faithfulness (judge)", "pct"),
    ("e2e_overlap_accuracy", "End-to-end accuracy by reference overlap (no model)", "pct"),
    ("overlap_correctness", f"Answers right by reference overlap (F1 >= {F1_CORRECT})", "pct"),
    ("reference_f1", "Reference token F1 (mean)", "num"),
    ("citation_validity", "Citation validity", "pct"),
    ("answer_score", "Answer score (compile metric)", "num"),
    ("correct_refusal_rate", "Correct-refusal rate", "pct"),
    ("false_refusal_rate", "False-refusal rate", "pct"),
    ("error_rate", "Agent errors", "pct"),
    ("grader_set_precision", "Grader precision (set)", "pct"),
    ("grader_set_recall", "Grader recall (set)", "pct"),
    ("grader_chunk_precision", "Grader precision (chunk)", "pct"),
    ("grader_chunk_recall", "Grader recall (chunk)", "pct"),
    ("grader_score", "Grader score (compile metric)", "num"),
    ("rewrite_success_rate", "Rewrite success rate", "pct"),
    ("rewrites_per_answerable", "Rewrites per answerable item", "num"),
    ("loop_rate", "Loop rate (all rewrites used)", "pct"),
    ("steps_mean", "Steps per query (mean)", "num"),
    ("steps_p95", "Steps per query (p95)", "num"),
    ("recall_at_k", "Recall@k (first retrieval)", "num"),
    ("mrr_at_k", "MRR@k (first retrieval)", "num"),
    ("hit_at_k", "Hit@k (first retrieval)", "pct"),
    ("needle_recall", "Needle recall@k (first retrieval)", "pct"),
    ("latency_p50_ms", "Latency p50 per query (ms)", "int"),
    ("latency_p95_ms", "Latency p95 per query (ms)", "int"),
    ("tokens_in_per_query", "Tokens in per query", "int"),
    ("tokens_out_per_query", "Tokens out per query", "int"),
    ("cost_per_query", "Cost per query (USD)", "usd"),
    ("cached_step_share", "LM steps served from cache", "pct"),
)
# the data route's (an index with tables, rag.eval.data_metrics): a section of their own, only when a run has them
DATA_ROWS: tuple[tuple[str, str, str], ...] = (
    ("routing_accuracy", "Routing accuracy (docs / data / both)", "pct"),
    ("sql_execution_accuracy", "SQL execution accuracy (gold rows)", "pct"),
    ("sql_validity", "SQL validity (a statement ran)", "pct"),
    ("sql_correction_rate", "SQL correction rate", "pct"),
    ("sql_correction_success", "SQL correction success", "pct"),
    ("guard_rejection_rate", "Guard rejections (of statements)", "pct"),
    ("critic_flag_rate", "Critic flag rate (low confidence)", "pct"),
    ("unanswerable_caught", "Unanswerable refused or flagged", "pct"),
    ("key_fact_accuracy", "Key-fact accuracy (no model)", "pct"),
)
ROUTE_ROWS = ("routing_accuracy", "sql_execution_accuracy", "key_fact_accuracy", "false_refusal_rate",
              "unanswerable_caught", "critic_flag_rate", "latency_p50_ms")
TYPE_ROWS = ("e2e_accuracy", "answer_correctness", "false_refusal_rate", "correct_refusal_rate", "error_rate",
             "recall_at_k", "needle_recall", "rewrites_per_answerable", "steps_mean")
INTERVALS_NOTE = ("Each figure: value [95% interval] and n, what it counts (items unless named). Wilson interval "
                  "for a share of items; a bootstrap over items (1,000 resamples, seeded) for means and percentiles; "
                  "for counts pooled over steps, chunks or citations, the wider of the two.")


def fmt(value: float | None, kind: str, why: str | None = None) -> str:
    if value is None:
        return f"— ({why})" if why else "—"
    return {"pct": f"{value:.1%}", "num": f"{value:.2f}", "int": f"{value:,.0f}", "usd": f"{value:.6f}"}[kind]


def fmt_ci(value: float | None, kind: str, why: str | None = None, ci: dict[str, Any] | None = None) -> str:
    """``fmt`` plus the 95% interval and n, e.g. ``41.7% [19.3%, 68.0%] n=12``."""
    text = fmt(value, kind, why)
    if value is None or not ci:
        return text
    n = f"n={ci['n']}" + ("" if ci.get("unit") == "items" else f" {ci['unit']}")
    if ci.get("lo") is None or ci.get("hi") is None:
        return f"{text} {n}"
    return f"{text} [{fmt(ci['lo'], kind)}, {fmt(ci['hi'], kind)}] {n}"


def run_intervals(run: dict[str, Any], item_type: str | None = None) -> dict[str, Any]:
    """The run's intervals from summary.json, or computed from its records (summaries of older runs lack them)."""
    from rag.eval.agent_metrics import intervals

    summary = run["summary"] if item_type is None else run["summary"].get("by_type", {}).get(item_type, {})
    if "ci" in summary:
        return summary["ci"]
    return intervals([r["scores"] for r in run["records"] if item_type is None or r["type"] == item_type])


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """``{"dir", "summary", "records"}`` for one run directory (records limited to the summary's selection)."""
    run_dir = Path(run_dir)
    path = run_dir / SUMMARY
    if not path.is_file() and not (run_dir / RESULTS).is_file():
        raise InputError(f"{run_dir} has no {SUMMARY}; point rag report at a directory written by rag eval")
    everything = read_records(run_dir)
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(summary, dict) or not isinstance(summary.get("metrics"), dict):
            raise ValueError("not a summary object")
    except (OSError, ValueError) as exc:  # missing or damaged: rebuilt from the results (nothing is written)
        warnings.warn(f"{path}: {'missing' if isinstance(exc, FileNotFoundError) else 'damaged'}; "
                      f"recomputed from {RESULTS} (every finished item)", stacklevel=2)
        summary = recompute_summary(run_dir, everything)
    wanted = set(summary.get("ids") or [])
    records = [r for r in everything if r["id"] in wanted]
    if len({r["id"] for r in records}) != summary.get("n_done"):  # damaged lines: count only what can be read
        warnings.warn(f"{path} counts {summary.get('n_done')} finished items, {RESULTS} holds {len(records)} readable "
                      "ones; their metrics are recomputed", stacklevel=2)
        summary = recompute_summary(run_dir, everything, ids=list(summary.get("ids") or []))
    return {"dir": run_dir, "summary": summary, "records": records}


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _name(run: dict[str, Any]) -> str:
    return run.get("name") or run["summary"].get("config_name") or run["dir"].name


def _name_apart(runs: Sequence[dict[str, Any]]) -> None:
    """Two runs of one config are named after their folders too (:func:`rag.eval.runs.names_apart`)."""
    for r, name in zip(runs, names_apart([_name(r) for r in runs], [r["dir"] for r in runs])):
        r["name"] = name


def metric_table(runs: Sequence[dict[str, Any]], rows_of: Sequence[tuple[str, str, str]] = ROWS) -> list[str]:
    """The main table: one row per metric, one column per run."""
    header = ["Metric", *(_name(r) for r in runs)]
    rows = [["Items (done / selected)", *(f"{r['summary']['n_done']} / {r['summary']['n_selected']}" for r in runs)]]
    cis = [run_intervals(r) for r in runs]
    for key, label, kind in rows_of:
        rows.append([label.replace("@k", f"@{runs[0]['summary'].get('k', 'k')}"),
                     *(fmt_ci(r["summary"]["metrics"].get(key), kind, r["summary"]["why"].get(key), ci.get(key))
                       for r, ci in zip(runs, cis))])
    return _table(header, rows)


def has_data_route(summaries: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any run routed questions (an index with tables): its data-route metrics are then shown."""
    return any("routing_accuracy" in s["metrics"] for s in summaries)


def metric_rows(summaries: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, str, str], ...]:
    """The metric rows for these runs' summaries: ROWS, then DATA_ROWS when a run routed questions."""
    return (*ROWS, *DATA_ROWS) if has_data_route(summaries) else ROWS


def data_route_section(runs: Sequence[dict[str, Any]]) -> list[str]:
    """The router, the SQL writer and its guard, and the critic; then the main figures per gold route."""
    if not has_data_route([r["summary"] for r in runs]):
        return []
    lines = ["## Data route (router, SQL, critic)", "",
             "Only for an index with tables (rag.eval.data_metrics). SQL execution accuracy: the statement that ran "
             "returned the gold rows; key-fact accuracy: the answer holds every key fact of the item (a refusal "
             "counts as wrong).", "", *metric_table(runs, DATA_ROWS), ""]
    lines += _flags_section(runs)
    routes = [t for t in ("docs", "data", "both") if any(t in r["summary"].get("by_route", {}) for r in runs)]
    routes += sorted({t for r in runs for t in r["summary"].get("by_route", {})} - set(routes))
    for route in routes:
        subs = [r["summary"].get("by_route", {}).get(route) for r in runs]
        rows = []
        for key in ROUTE_ROWS:
            label, kind = next((lab, k) for m, lab, k in (*ROWS, *DATA_ROWS) if m == key)
            rows.append([label, *(fmt_ci(sub["metrics"].get(key), kind, sub["why"].get(key), (sub.get("ci") or {}).get(key))
                                  if sub else "— (no items)" for sub in subs)])
        n = " / ".join(str((sub or {}).get("n", 0)) for sub in subs)
        lines += [f"### route {route} (items: {n})", "", *_table(["Metric", *(_name(r) for r in runs)], rows), ""]
    return lines


def _flags_section(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Which critic check flagged the answers returned low_confidence, per run (rag.eval.data_metrics.flags_by_check)."""
    from rag.eval.data_metrics import flags_by_check

    counts = [flags_by_check([rec.get("scores") or {} for rec in r.get("records") or []]) for r in runs]
    checks = sorted({c for found in counts for c in found})
    if not checks:
        return []
    cell = lambda f: (f"{f['unanswerable']} / {f['right']} / {f['wrong']}" if f else "0")  # noqa: E731
    rows = [[f"`{c}`", *(cell(found.get(c)) for found in counts)] for c in checks]
    return ["### Critic flags by check", "",
            "Answers flagged low_confidence, by the check that flagged them (the trace's last critique step; "
            "\"not recorded\" for runs made before the step named its check): unanswerable items / answerable items "
            "with every key fact right (a false flag) / answerable items with a key fact wrong or none given.", "",
            *_table(["Check", *(_name(r) for r in runs)], rows), ""]


def paired_sections(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Each run after the first compared with the first, item by item (rag.stats.paired)."""
    from rag.stats.paired import compare_records, render

    lines = []
    for r in runs[1:]:
        a, b = _name(runs[0]), _name(r)
        lines += [f"### {b} vs {a}", "", *render(compare_records(runs[0]["records"], r["records"], a, b), a, b)]
    return lines


def report(run_dirs: Sequence[str | Path], *, failures: int = 3) -> str:
    """The whole Markdown report for ``run_dirs`` with up to ``failures`` failure cases per run."""
    if not run_dirs:
        raise InputError("no run directories given and none found; run rag eval --config NAME first")
    runs = [load_run(d) for d in run_dirs]
    _name_apart(runs)
    lines = ["# Sieve evaluation report", ""]
    for r in runs:
        s = r["summary"]
        state = "complete" if s.get("complete") else "INCOMPLETE (resume with the same rag eval command)"
        lines.append(f"- **{_name(r)}**: `{r['dir']}`, golden {s.get('golden_hash')}, k={s.get('k')}, "
                     f"max_rewrites={s.get('max_rewrites')}, {s['n_done']}/{s['n_selected']} items, {state}")
    lines += ["", "## Metrics", "", INTERVALS_NOTE, "", *metric_table(runs), ""]
    lines += data_route_section(runs)
    if len(runs) > 1:
        lines += ["## Paired comparisons (same items)", "",
                  "McNemar (exact) for right/wrong outcomes, paired bootstrap interval and sign-flip p for the rest; "
                  "a difference is called only at p < 0.05.", "", *paired_sections(runs)]
    types = sorted({t for r in runs for t in r["summary"].get("by_type", {})})
    if types:
        lines += ["## By question type", ""]
        for t in types:
            rows = []
            tcis = [run_intervals(r, t) if t in r["summary"].get("by_type", {}) else {} for r in runs]
            for key in TYPE_ROWS:
                label, kind = next((lab, k) for m, lab, k in ROWS if m == key)
                cells = []
                for r, ci in zip(runs, tcis):
                    sub = r["summary"].get("by_type", {}).get(t)
                    cells.append(fmt_ci(sub["metrics"].get(key), kind, sub["why"].get(key), ci.get(key))
                                 if sub else "— (no items)")
                rows.append([label.replace("@k", f"@{runs[0]['summary'].get('k', 'k')}"), *cells])
            n = " / ".join(str(r["summary"].get("by_type", {}).get(t, {}).get("n", 0)) for r in runs)
            lines += [f"### {t} (items: {n})", "", *_table(["Metric", *(_name(r) for r in runs)], rows), ""]
    nodes = sorted({n for r in runs for n in r["summary"].get("latency_by_node", {})})
    if nodes:
        rows = [[n, *(_node_cell(r["summary"]["latency_by_node"].get(n)) for r in runs)] for n in nodes]
        lines += ["## Latency per node (p50 / p95 ms, steps)", "", *_table(["Node", *(_name(r) for r in runs)], rows),
                  "", "Cached LM steps are charged their originally measured latency where it is known.", ""]
    lines += _rewrite_depth_section(runs)
    lines += ["## Failures", ""]
    for r in runs:
        lines += _failures(r, failures)
    return "\n".join(lines).rstrip() + "\n"


def _rewrite_depth_section(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Per run and rewrite depth: items reaching it, how many were then answered, and the seconds it cost."""
    rows = [[_name(r), str(d["depth"]), str(d["reached"]), str(d["unanswerable"]), str(d["answered"]),
             f"{d['seconds']:,.1f} s ({fmt(d['share'], 'pct')})"] for r in runs for d in rewrite_depths(r["records"])]
    if not rows:
        return []
    return ["## What each rewrite bought", "",
            "Items that reached the k-th rewrite, the answerable ones among them the agent then answered, and the "
            "agent seconds from that rewrite on (share of the run's): counts of this run, no intervals. With "
            "greedy decoding and the LM cache off, max_rewrites = k - 1 would have refused those items there: it "
            "gives up those answers and saves those seconds (rag/report/rewrite_depth.py).", "",
            *_table(["Run", "Rewrite", "Items reaching it", "Of them unanswerable", "Answered after it",
                     "Agent s from it on"], rows), ""]


def _short(text: str, limit: int = 300) -> str:
    """One line, at most ``limit`` characters (LM parse errors quote whole responses)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _node_cell(v: dict[str, Any] | None) -> str:
    return "—" if not v else f"{v['p50_ms']:,.0f} / {v['p95_ms']:,.0f} ({v['n']})"


def _failures(run: dict[str, Any], limit: int) -> list[str]:
    diagnosed = [(rec, d) for rec in run["records"] if (d := diagnose(rec)) is not None]
    counts = Counter(d["kind"] for _, d in diagnosed)
    lines = [f"### {_name(run)}: {len(diagnosed)} failed of {len(run['records'])}", ""]
    if counts:
        lines += [", ".join(f"{k}: {counts[k]}" for k in KINDS if counts[k]), ""]
    for rec, d in diagnosed[:limit]:
        pred = rec.get("prediction") or {}
        lines += [f"**{rec['id']}** ({rec['type']}): {rec['question']}", "",
                  f"- diagnosis: **{d['kind']}**: {_short(d['detail'])}",
                  f"- reference: {rec.get('reference_answer') or '—'}",
                  f"- answer: {pred.get('answer', '—')}",
                  f"- gold chunks: {', '.join(rec.get('gold_ids') or []) or '— (none)'}", ""]
        if pred.get("trace"):
            lines += ["```", Trace.from_dict(pred["trace"]).render(), "```", ""]
    return lines
