"""Does a drafted golden set rank whole-agent configurations as the hand-written one does?

    rag eval --config CONFIG --golden drafted.jsonl --reviewed-only --split all --no-judge --out runs/drafted-CONFIG
    rag eval --config CONFIG --split test --no-judge --out runs/hand-CONFIG
    python benchmarks/drafted_agent_rank.py --set drafted=runs/drafted-baseline,runs/drafted-hybrid,... \\
        --set hand=runs/hand-baseline,runs/hand-hybrid,... --out benchmarks/results/drafted_agent_rank.md

Reads the finished ``rag eval`` runs (no model call) and, per set, ranks the configurations by the share of items
the agent got right, with no judge and no hand labels: an answerable item answered with a reference-overlap match
(token F1 with the reference answer >= rag.eval.overlap.F1_CORRECT; a refusal is wrong), an unanswerable one
refused. Beside it: the same share over answerable items only (``e2e_overlap_accuracy``), the false-refusal and
correct-refusal rates, Recall@4 of the first retrieval and seconds per question, each with its 95% interval.
Configurations whose intervals overlap are tied in substance; the order compares means, equal shares tie.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402

RANK_BY = "right_overall"  # computed here from results.jsonl (right_overall below)
COLUMNS = (("right_overall", "right (overlap or refused)", "pct"), ("e2e_overlap_accuracy", "right by overlap (answerable)", "pct"),
           ("false_refusal_rate", "false refusals", "pct"), ("correct_refusal_rate", "unanswerable refused", "pct"),
           ("recall_at_k", "first retrieval Recall@4", "num"), ("latency_p50_ms", "seconds p50", "sec"))


def right_overall(run: Path) -> tuple[float, dict]:
    """The share of items right (answerable: answered with a reference-overlap match; unanswerable: refused) and
    its Wilson interval as summary.json's ``ci`` records one."""
    from rag.eval.runs import read_records
    from rag.stats.intervals import wilson

    scores = [record["scores"] for record in read_records(run)]
    n = len(scores)
    right = sum(bool(s.get("refused")) if s.get("should_refuse") else bool(s.get("overlap_correct")) for s in scores)
    lo, hi = wilson(right, n)
    return right / n, {"lo": lo, "hi": hi, "n": n}


def _cell(summary: dict, key: str, kind: str) -> str:
    value, ci = summary["metrics"].get(key), (summary.get("ci") or {}).get(key) or {}
    if value is None:
        return "n/a"
    show = {"pct": lambda v: f"{v:.1%}", "num": lambda v: f"{v:.3f}", "sec": lambda v: f"{v / 1000:.1f}"}[kind]
    span = f" [{show(ci['lo'])}, {show(ci['hi'])}]" if "lo" in ci and "hi" in ci else ""
    return f"{show(value)}{span}" + (f" n={ci['n']}" if "n" in ci else "")


def ranking(runs: list[Path]) -> tuple[list[str], str]:
    """(the table's rows, the configurations best first, ties joined by "=")."""
    summaries = [(json.loads((run / "summary.json").read_text(encoding="utf-8")), run) for run in runs]
    for summary, run in summaries:
        summary["metrics"]["right_overall"], summary.setdefault("ci", {})["right_overall"] = right_overall(run)
    incomplete = [str(run) for s, run in summaries if not s.get("complete")]
    if incomplete:
        raise SystemExit(f"these runs are not finished (resume them with the same rag eval command): {', '.join(incomplete)}")
    summaries.sort(key=lambda pair: -(pair[0]["metrics"].get(RANK_BY) or 0.0))
    rows = [f"| {s['config_name']} | `{run.name}` | " + " | ".join(_cell(s, k, kind) for k, _, kind in COLUMNS) + " |"
            for s, run in summaries]
    groups: dict[float, list[str]] = {}  # equal shares are a tie, written "a = b" (names sorted, so orders compare)
    for s, _ in summaries:
        groups.setdefault(round(s["metrics"].get(RANK_BY) or 0.0, 9), []).append(s["config_name"])
    return rows, " > ".join(" = ".join(sorted(names)) for names in groups.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", action="append", required=True, metavar="NAME=RUN,RUN,...",
                        help="a golden set's name and its run folders, one per configuration (repeatable)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    lines = ["# Configurations ranked by the whole agent on each golden set", "",
             f"`python benchmarks/drafted_agent_rank.py {' '.join('--set ' + s for s in args.set)}`", "",
             "Ranked by the share right (reference overlap for answerable items, refusal for unanswerable ones; no "
             "judge); intervals: Wilson 95% for shares, bootstrap for the rest.", ""]
    orders = {}
    for spec in args.set:
        name, _, folders = spec.partition("=")
        rows, orders[name] = ranking([Path(f) for f in folders.split(",") if f])
        lines += [f"## {name}", "", "| configuration | run | " + " | ".join(label for _, label, _ in COLUMNS) + " |",
                  "| --- | --- |" + " --- |" * len(COLUMNS), *rows, ""]
    lines += ["## Orders", ""] + [f"- {name}: {order}" for name, order in orders.items()]
    first = next(iter(orders.values()))
    lines += ["", f"Same order on every set: {'yes' if all(o == first for o in orders.values()) else 'no'}."]
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
