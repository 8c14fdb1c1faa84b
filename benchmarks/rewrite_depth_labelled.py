"""What each rewrite bought: per recorded run, the items that reached the 1st, 2nd, ... rewrite, what they ended
as (by the hand labels: the part rag report cannot show), and the agent seconds spent from that rewrite on. No LM
calls: it re-reads recorded runs (rag.report.rewrite_depth).

Run: python benchmarks/rewrite_depth_labelled.py RUN_DIR [RUN_DIR ...] [--labels golden/judge_labels.jsonl]
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
from rag.eval.calibrate import human_outcomes, load_labels  # noqa: E402
from rag.eval.runs import read_records  # noqa: E402
from rag.report.rewrite_depth import rewrite_depths  # noqa: E402


def depth_rows(run: Path, labels: list[dict]) -> list[tuple]:
    """One row per rewrite depth reached in ``run`` (rag.report.rewrite_depth), with the answers after it that the hand
    labels call right and those without a label."""
    records = read_records(run)
    right = human_outcomes(records, labels)
    return [(d["depth"], d["reached"], d["unanswerable"], d["answered"],
             sum(right.get(key) is True for key in d["answered_keys"]),
             sum(right.get(key) is None for key in d["answered_keys"]), d["seconds"], d["share"])
            for d in rewrite_depths(records)]


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
    lines = [f"What each rewrite bought (`python benchmarks/rewrite_depth_labelled.py {' '.join(sys.argv[1:])}`; no LM calls)",
             "", "| run | rewrite | items reaching it | of them unanswerable | answered after it | right by the labels "
             "| unlabelled | agent s from it on | share of the run's agent s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for run in args.runs:
        for depth, reached, unanswerable, answered, good, unlabelled, seconds, share in depth_rows(run, labels):
            lines.append(f"| `{run}` | {depth} | {reached} | {unanswerable} | {answered} | {good} | {unlabelled} | "
                         f"{seconds:.0f} | {share:.1%} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
