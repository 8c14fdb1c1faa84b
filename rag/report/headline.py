"""The README's headline results, generated from committed runs so the table cannot drift from them.

:data:`HEADLINE_RUNS` names the recorded runs of today's defaults; :func:`table` reads each run's
``summary.json`` and ``results.jsonl`` and the hand labels in ``golden/judge_labels.jsonl``.
``python -m rag.report.headline`` rewrites the block between :data:`BEGIN` and :data:`END` in README.md;
``tests/test_docs.py`` fails when it is stale. The history of every figure is in docs/results.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rag.paths import labels_path, project_path

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
# (run folder under benchmarks/results/, what it is, the command that made it)
HEADLINE_RUNS = [
    ("eval-full-qwen1.5b-epyc-fusion", "`full` at today's defaults: the embedded Qwen2.5-Coder-1.5B in every role, "
     "uncompiled, on an index with passage windows, the dense list weighing 2 in the fusion (rrf_k 10), on a 2-core "
     "AMD EPYC (2026-12-05)",
     "rag index --index-dir windows && rag eval --config full --split test --no-artifact --no-judge --index-dir windows "
     "--set cache_dir=CACHE --out benchmarks/results/eval-full-qwen1.5b-epyc-fusion"),
    ("eval-full-qwen1.5b-epyc-windows", "the same with equal weights at rrf_k 60 (the default until the weights "
     "changed, 2026-12-05), same machine and index, run first with the same LM cache (docs/guides/retrieval.md "
     "compares the two, paired)",
     "rag index --index-dir windows && rag eval --config full --split test --no-artifact --no-judge --index-dir windows "
     "--set cache_dir=CACHE --set rrf_k=60 --set dense_weight=1 --out benchmarks/results/eval-full-qwen1.5b-epyc-windows"),
]
ROWS = [  # (metric key in summary.json, label, format)
    ("correct_refusal_rate", "correct refusals (unanswerable questions refused)", "pct"),
    ("false_refusal_rate", "false refusals (answerable questions refused)", "pct"),
    ("grader_set_precision", "grader precision (set level)", "pct"),
    ("grader_set_recall", "grader recall (set level)", "pct"),
    ("citation_validity", "citations that name a passage shown", "pct"),
    ("recall_at_k", "first retrieval Recall@4", "num"),
    ("mrr_at_k", "first retrieval MRR@4", "num"),
    ("latency_p50_ms", "agent seconds per question, p50 (2 cores)", "sec"),
]


def _fmt(value: float | None, kind: str) -> str:
    if value is None:
        return "n/a"
    return {"pct": f"{value:.1%}", "num": f"{value:.3f}", "sec": f"{value / 1000:.1f} s"}[kind]


def _cell(summary: dict[str, Any], key: str, kind: str) -> str:
    value, ci = summary["metrics"].get(key), (summary.get("ci") or {}).get(key)
    if value is None:
        return "n/a"
    if ci:
        return f"{_fmt(value, kind)} [{_fmt(ci['lo'], kind)}, {_fmt(ci['hi'], kind)}] n={ci['n']}"
    return _fmt(value, kind)


def _human(run_dir: Path) -> str:
    from rag.eval.calibrate import human_accuracy, load_labels
    from rag.eval.runs import read_records

    rows = human_accuracy(read_records(run_dir), load_labels(labels_path()))
    if not rows:
        return "not labelled"
    row = next(iter(rows.values()))
    if not row["n"]:
        return "not labelled"
    lo, hi = row["interval"][:2]
    return f"{row['accuracy']:.1%} [{lo:.1%}, {hi:.1%}] ({row['correct']} of n={row['n']})"


def table(results_dir: Path | None = None) -> str:
    """The Markdown block: one column per headline run, each figure with its 95% interval and n."""
    results_dir = results_dir or project_path("benchmarks", "results")
    runs = [(results_dir / name, what, cmd) for name, what, cmd in HEADLINE_RUNS]
    summaries = [json.loads((path / "summary.json").read_text(encoding="utf-8")) for path, _, _ in runs]
    head = ["| all test items of the built-in golden set | " + " | ".join(f"`{p.name}`" for p, _, _ in runs) + " |",
            "| --- |" + " --- |" * len(runs)]
    body = ["| items | " + " | ".join(str(s["n_done"]) for s in summaries) + " |",
            "| right by the hand labels (answerable items) | " + " | ".join(_human(p) for p, _, _ in runs) + " |"]
    body += [f"| {label} | " + " | ".join(_cell(s, key, kind) for s in summaries) + " |" for key, label, kind in ROWS]
    notes = [f"- `{p.name}`: {what}. Command: `{cmd}`; answers labelled by hand with `rag calibrate --run "
             f"benchmarks/results/{p.name}` (golden/judge_labels.jsonl). Intervals are 95%." for p, what, cmd in runs]
    return "\n".join(head + body + [""] + notes) + "\n"


def write(readme: Path | None = None) -> bool:
    """Replace the README block with :func:`table`; True when it changed."""
    readme = readme or project_path("README.md")
    text = readme.read_text(encoding="utf-8")
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    new = f"{before}{BEGIN}\n{table()}{END}{after}"
    if new != text:
        readme.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    print("README.md " + ("updated" if write() else "already current"), file=sys.stderr)
