"""The coverage check (rag.data.coverage) on the ops demo: which questions it flags, and what that does to recorded runs.

    python benchmarks/coverage_check.py --index-dir $SIEVE_HOME/demo/ops/index \
        --run benchmarks/results/eval-ops-qwen1.5b-epyc --run benchmarks/results/eval-ops-unanswerable-epyc \
        --out benchmarks/results/coverage.md

No model call. Per question set: the share of questions the check flags (answerable ones: false flags;
unanswerable ones: caught), with Wilson intervals and the reasons. Per recorded run (``rag eval`` on the demo with
today's agent, made before the check existed): its unanswerable items refused or flagged as recorded, and as the
check would have left them (an answered item whose question it flags is returned flagged), paired (McNemar); and
its answerable items' answers that the check would flag.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit, share  # noqa: E402
from rag.stats.intervals import compare_paired  # noqa: E402

SETS = [("golden/ops_routes.jsonl", None, False, "route-labelled questions, all answerable (written blind)"),
        ("golden/ops_unanswerable.jsonl", "blind", True, "blind unanswerable questions (the rules were written with them in view)"),
        ("golden/ops_unanswerable.jsonl", "blind2", True, "blind unanswerable questions written after the rules"),
        ("golden/ops_unanswerable.jsonl", "blind3", True, "the same, a brief asking for more single values"),
        *(("golden/ops_unanswerable.jsonl", f"blind{n}", True, "blind unanswerable questions written later")
          for n in range(4, 9)),
        ("golden/ops_sql_blind.jsonl", None, False, "blind data questions with gold SQL, all answerable")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-dir", type=Path, required=True, help="the ops demo's index (rag demo ops, rag index)")
    parser.add_argument("--golden", type=Path, help="the demo's golden set (default: beside the index)")
    parser.add_argument("--run", type=Path, action="append", default=[], help="a rag eval run on the demo; repeatable")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.config import load_settings
    from rag.data import Warehouse
    from rag.data.coverage import Coverage
    from rag.index.store import Index

    index = Index.load(args.index_dir, load_settings({"index_dir": args.index_dir}))
    coverage = Coverage.for_index(index, Warehouse(index.tables_path))
    golden = args.golden or args.index_dir.parent / "golden.jsonl"
    demo = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines() if line.strip()]
    sets = []
    for name, split, bad, what in SETS:
        items = [json.loads(x) for x in (ROOT / name).read_text(encoding="utf-8").splitlines() if x.strip()]
        sets.append((name + (f", split {split}" if split else ""), [x for x in items if split in (None, x["split"])],
                     bad, what))
    sets += [(f"{golden.name} (answerable)", [x for x in demo if not x["should_refuse"]], False, "the demo's golden set"),
             (f"{golden.name} (unanswerable)", [x for x in demo if x["should_refuse"]], True, "the demo's golden set")]
    lines = ["# The coverage check on the ops demo (no model call)", "",
             f"Command: `python benchmarks/coverage_check.py --index-dir $SIEVE_HOME/demo/ops/index {' '.join(f'--run {r}' for r in args.run)}`", "",
             f"Index: {args.index_dir.name}; dates span {coverage.years}.", "",
             "| questions | what | flagged |", "| --- | --- | --- |"]
    flagged: dict[str, list[str]] = {}
    for name, items, bad, what in sets:
        hits = [(x, coverage.gaps(x["question"])) for x in items]
        hits = [(x, g) for x, g in hits if g]
        flagged.update({x["id"]: g for x, g in hits})
        lines.append(f"| {name} | {what} | {share(len(hits), len(items))} ({'caught' if bad else 'false flags'}) |")
    lines += ["", "Flagged questions and the reasons:", ""]
    for _, items, bad, _what in sets:
        for x in items:
            if x["id"] in flagged:
                lines.append(f"- {'unanswerable' if bad else '**answerable**'} `{x['id']}`: {x['question']} -> "
                             f"{'; '.join(flagged[x['id']])}")
    for run in args.run:
        records = [json.loads(line) for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines()
                   if line.strip()]
        before, after, false_flags, answered = [], [], 0, 0
        for r in records:
            p = r.get("prediction") or {}
            gaps = coverage.gaps(r["question"])
            if r["should_refuse"]:
                caught = bool(p.get("refused") or p.get("low_confidence"))
                before.append(float(caught))
                after.append(float(caught or bool(gaps)))
            elif not p.get("refused"):
                answered += 1
                false_flags += bool(gaps) and not p.get("low_confidence")
        cmp = compare_paired(before, after)
        lines += ["", f"## Run `{run.name}`", "",
                  f"- unanswerable refused or flagged: as recorded {share(int(sum(before)), len(before))}; with the check "
                  f"{share(int(sum(after)), len(after))} (McNemar p={cmp.p:.3f})",
                  f"- answers to answerable questions the check would newly flag: {share(false_flags, answered)}"]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
