"""What each rewrite bought: per recorded run, the items that reached the 1st, 2nd, ... rewrite, what they ended
as, and the agent seconds spent from that rewrite on. No LM calls: it re-reads recorded runs.

Run: python benchmarks/rewrite_depth.py RUN_DIR [RUN_DIR ...] [--labels golden/judge_labels.jsonl]
                                       [--out benchmarks/results/rewrite_depth.md]

Decoding is greedy and the runs are made with the LM cache off, so a run with ``max_rewrites = k - 1`` would
have taken the same steps up to the k-th rewrite and refused there: the items that reached it and were then
answered right (by the hand labels) are what a bound of k - 1 would have lost, and the seconds from it on are
what it would have saved (the refusal itself costs nothing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402
from rag.calibrate import human_outcomes, load_labels  # noqa: E402
from rag.runs import read_records  # noqa: E402


def depth_rows(run: Path, labels: list[dict]) -> list[tuple]:
    """One row per rewrite depth reached in ``run``: (depth, reached, unanswerable among them, answered after,
    right after, unlabelled after, seconds from that rewrite on, the run's agent seconds)."""
    records = [r for r in read_records(run) if r.get("status") == "ok"]
    right = human_outcomes(records, labels)
    total = sum((r["scores"].get("latency_ms") or 0) for r in records) / 1000
    depths: dict[int, list] = {}
    for rec in records:
        steps = ((rec.get("prediction") or {}).get("trace") or {}).get("steps") or []
        rewrites = [i for i, step in enumerate(steps) if step["node"] == "rewrite"]
        for depth, at in enumerate(rewrites, 1):
            row = depths.setdefault(depth, [0, 0, 0, 0, 0, 0.0])
            row[0] += 1
            row[1] += bool(rec.get("should_refuse"))
            if not rec.get("should_refuse") and not rec["scores"].get("refused"):
                row[2] += 1
                outcome = right.get((str(rec.get("config", "")), str(rec["id"])))
                row[3] += outcome is True
                row[4] += outcome is None
            row[5] += sum((step.get("latency_ms") or 0) for step in steps[at:]) / 1000
    return [(depth, *row, total) for depth, row in sorted(depths.items())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval run folders (rag eval --out)")
    parser.add_argument("--labels", type=Path, default=ROOT / "golden" / "judge_labels.jsonl")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    for run in args.runs:
        if not (run / "results.jsonl").is_file():
            parser.error(f"{run}: no results.jsonl there; give a folder written by rag eval --out")
    labels = load_labels(args.labels)
    lines = [f"What each rewrite bought (`python benchmarks/rewrite_depth.py {' '.join(sys.argv[1:])}`; no LM calls)",
             "", "| run | rewrite | items reaching it | of them unanswerable | answered after it | right by the labels "
             "| unlabelled | agent s from it on | share of the run's agent s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for run in args.runs:
        for depth, reached, unanswerable, answered, good, unlabelled, seconds, total in depth_rows(run, labels):
            lines.append(f"| `{run}` | {depth} | {reached} | {unanswerable} | {answered} | {good} | {unlabelled} | "
                         f"{seconds:.0f} | {seconds / total:.1%} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
