"""Where the agent's `both` answers lose the policy's figure: shown to the SQL writer, used in its statement, right.

    python benchmarks/figure_use.py --index-dir $SIEVE_HOME/demo/ops/index \
        --run benchmarks/results/eval-ops-sqlblind1{2,3,4,5,6}-today --out benchmarks/results/figure_use.md

No model call: it reads recorded `rag eval` runs. For each item whose gold route is `both` (its `evidence` is the
policy sentence the gold query takes its number from): whether the passages the grader accepted, as the SQL writer
reads them (rag.agent.dataroute.documents_text), hold one of the evidence's numbers; whether
the last statement written contains it (as written, or a percentage as a fraction: 90 as .90); and whether the
statement that ran returned the gold rows (rag.eval.data_metrics.same_rows). Years (2020-2029) are not figures.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit, shown_path  # noqa: E402

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def figures(evidence: list[str]) -> set[str]:
    """The numbers the evidence sentences state, without thousands separators or years."""
    found = {n.replace(",", "") for e in evidence for n in NUMBER.findall(e)}
    return found - {str(year) for year in range(2020, 2030)}


def uses(sql: str, numbers: set[str]) -> bool:
    """Whether ``sql`` states one of ``numbers``, as written or a whole percentage as a fraction (90 -> .90)."""
    return any(re.search(rf"(?<![\d.]){re.escape(n)}(?!\d)", sql) or n.isdigit() and re.search(rf"0?\.{n}\b", sql)
               for n in numbers)


def classify(record: dict, chunks: dict[str, str]) -> tuple[str, str, str]:
    """(what the writer was shown, what it wrote, whether it was right) for one recorded `both` item."""
    from types import SimpleNamespace

    from rag.agent.dataroute import documents_text
    from rag.eval.data_metrics import same_rows

    steps = ((record.get("prediction") or {}).get("trace") or {}).get("steps") or []
    graded = [s for s in steps if s["node"] == "grade"]
    accepted = (graded[-1].get("chosen_ids") or []) if graded else []
    read = documents_text([SimpleNamespace(chunk_id=c, text=chunks.get(c, "")) for c in accepted]).replace(",", "")
    numbers = figures(record.get("evidence") or [])
    shown = "no number in the evidence" if not numbers else \
        "figure shown" if any(n in read for n in numbers) else "figure not shown"
    written = [s for s in steps if s["node"] == "sql"]
    ran = [s for s in written if s.get("verdict")]
    sql = ((ran or written)[-1].get("sql") or "") if written else ""
    wrote = "no statement" if not written else "figure used" if uses(sql, numbers) else "figure not used"
    rows = (ran[-1].get("result") or {}).get("rows") if ran else None
    right = rows is not None and same_rows(rows, record["data_gold"]["gold_result"])
    return shown, wrote, "gold rows" if right else "other rows or none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-dir", type=Path, required=True, help="the index the runs were made on (its chunks)")
    parser.add_argument("--run", type=Path, nargs="+", required=True, help="rag eval output folders")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    chunks = {}
    with (args.index_dir / "chunks.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            chunk = json.loads(line)
            chunks[chunk["id"]] = chunk["text"]
    counts: Counter = Counter()
    for run in args.run:
        for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if (record.get("data_gold") or {}).get("route") == "both":
                counts[classify(record, chunks)] += 1
    total = sum(counts.values())
    lines = ["# Where `both` answers lose the policy's figure", "",
             f"Command: `python benchmarks/figure_use.py --index-dir {shown_path(args.index_dir)} --run "
             f"{' '.join(shown_path(r) for r in args.run)}" + (f" --out {shown_path(args.out)}" if args.out else "")
             + "`", "", f"{total} items whose gold route is `both`. No model call.", "",
             "| the writer read | its statement | result | items |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {n} |" for (a, b, c), n in sorted(counts.items())]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
