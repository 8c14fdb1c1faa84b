"""Does a drafted golden set order the named configurations' first retrieval as the hand-written set does?

    python benchmarks/drafted_configs.py --drafted benchmarks/results/drafted_builtin_157.jsonl \
        --out benchmarks/results/drafted_configs_157.md

Each cell is ``rag eval --retrieval-only --config CONFIG --golden SET --split all --json`` on the built-in index
(``SIEVE_HOME``): Recall@4 with its bootstrap interval over the items with gold. The sets: the hand-written
``golden/python_ref.jsonl``, the drafted set, and its items a human kept (``--reviewed-by human``). ``deep`` writes
one HyDE passage per question on the rewriter's model (the DSPy cache makes a rerun cheap); ``full`` searches as
``hybrid`` does first, so it is no column here. Speaks for retrieval only: the agent's answers and refusals are
benchmarks/drafted_agent_rank.py's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.drafted_vs_hand import agrees, ranked  # noqa: E402
from benchmarks.tables import emit  # noqa: E402

CONFIGS = ("baseline", "hybrid", "deep")


def recall(config: str, golden: Path, *extra: str) -> tuple[int, float, float, float]:
    """(items scored, Recall@4, interval low, high) of one ``rag eval --retrieval-only`` run."""
    rag = shutil.which("rag") or str(Path(sys.executable).with_name("rag"))  # the project's console script
    out = subprocess.run([rag, "eval", "--retrieval-only", "--config", config, "--golden",
                          str(golden), "--split", "all", "--json", *extra], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    report = json.loads(out.stdout)
    ci = report["ci"]["recall@4"]
    return report["scored"], report["recall@4"], ci["lo"], ci["hi"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--drafted", type=Path, required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sets = [("hand-written (python_ref.jsonl, all splits)", ROOT / "golden" / "python_ref.jsonl", ()),
            (f"drafted ({args.drafted.name}), every item with gold", args.drafted, ()),
            ("drafted, kept by a human reviewer", args.drafted, ("--reviewed-by", "human"))]
    lines = ["# A drafted golden set against the hand-written one: configurations, first retrieval", "",
             f"Command: `python benchmarks/drafted_configs.py --drafted {args.drafted}`; "
             "Recall@4 [95% bootstrap interval], items with gold only.", "",
             "| set | n | " + " | ".join(CONFIGS) + " | order | agrees with the hand-written order |",
             "| --- | --- |" + " --- |" * len(CONFIGS) + " --- | --- |"]
    first = None
    for name, path, extra in sets:
        cells, means, n = [], {}, 0
        for config in CONFIGS:
            n, mean, lo, hi = recall(config, path, *extra)
            means[config] = mean
            cells.append(f"{mean:.3f} [{lo:.2f}, {hi:.2f}]")
            print(f"{name}: {config} {mean:.3f}", file=sys.stderr, flush=True)
        order = ranked(means)
        first = first or order
        lines.append(f"| {name} | {n} | " + " | ".join(cells) + f" | {order} | {agrees(order, first)} |")
    emit(lines + ["", "The order compares means only; where neighbouring intervals overlap, it is not a finding on its own."],
         args.out)


if __name__ == "__main__":
    main()
