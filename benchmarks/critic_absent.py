"""The critic's ``absent`` or ``period`` check (rag.data.unrecorded) replayed on recorded queries: how many right
answers it would flag, and how many unanswerable questions it would catch that were answered unflagged. No model call.

Run: python benchmarks/critic_absent.py [--check absent|period] [--runs 'benchmarks/results/eval-ops-*'[,GLOB...]]
                                        [--skip unanswerable19] [--records 'benchmarks/results/*records*.jsonl']
                                        [--out FILE]

From each ``rag eval`` run folder (``results.jsonl``): the last statement that ran for each item. An answerable
item is right when its statement returned the gold rows or its answer states every key fact; an unanswerable one
is caught already when it was refused or flagged. From benchmarks/data_route.py's records: every statement that
returned the gold rows (one per question and statement). Counts are of items as recorded, so a question run in
several folders counts once per run.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit, share  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", choices=("absent", "period"), default="absent", help="the check replayed")
    parser.add_argument("--runs", default=str(ROOT / "benchmarks" / "results" / "eval-ops-*"),
                        help="run folders (globs, comma-separated)")
    parser.add_argument("--skip", default="", help="comma-separated substrings of run folders to leave out")
    parser.add_argument("--records", default=str(ROOT / "benchmarks" / "results" / "*records*.jsonl"),
                        help="benchmarks/data_route.py records (glob)")
    parser.add_argument("--index-dir", default=None, help="the index holding the tables (default: the demo's)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here (Markdown)")
    args = parser.parse_args()

    from rag.data import Warehouse
    from rag.data.coverage import date_spans
    from rag.data.schemalink import column_values
    from rag.data.unrecorded import Unrecorded
    from rag.paths import sieve_home

    index_dir = Path(args.index_dir or sieve_home() / "demo" / "ops" / "index")
    record = json.loads((index_dir / "manifest.json").read_text())["tables"]
    with Warehouse(index_dir / "tables.duckdb") as warehouse:
        unrecorded = Unrecorded.from_record(record, column_values(record, warehouse), date_spans(record, warehouse))
    check = unrecorded.find if args.check == "absent" else unrecorded.outside
    skip = [s for s in args.skip.split(",") if s]
    counts = dict.fromkeys(["right", "right_flagged", "wrong", "wrong_flagged", "unanswerable", "open", "caught"], 0)
    flagged_right, caught = [], []
    runs = sorted({d for pattern in args.runs.split(",") for d in glob.glob(pattern.strip()) if not any(s in d for s in skip)})
    for run in runs:
        for line in Path(run, "results.jsonl").read_text().splitlines():
            item = json.loads(line)
            pred, data = item.get("prediction") or {}, ((item.get("scores") or {}).get("data") or {})
            ran = [s["sql"] for s in (pred.get("trace") or {}).get("steps", [])
                   if s.get("node") == "sql" and s.get("verdict") and s.get("sql")]
            if not ran:
                continue
            found = check(ran[-1])
            if item.get("should_refuse"):
                counts["unanswerable"] += 1
                if not (pred.get("refused") or pred.get("low_confidence")):
                    counts["open"] += 1
                    counts["caught"] += bool(found)
                    if found:
                        caught.append(f"{Path(run).name} {item['id']} ({item['question']}): {'; '.join(found)}")
            elif data.get("exec_correct") or data.get("key_facts_ok"):
                counts["right"] += 1
                counts["right_flagged"] += bool(found)
                if found:
                    flagged_right.append(f"{Path(run).name} {item['id']}: {'; '.join(found)}")
            else:
                counts["wrong"] += 1
                counts["wrong_flagged"] += bool(found)
    seen, statements, statements_flagged = set(), 0, 0
    for path in sorted(glob.glob(args.records)):
        for line in Path(path).read_text().splitlines():
            rec = json.loads(line)
            if rec.get("role") in ("sql", "correct") and rec.get("right") and rec.get("sql") \
                    and (rec["id"], rec["sql"]) not in seen:
                seen.add((rec["id"], rec["sql"]))
                statements += 1
                statements_flagged += bool(check(rec["sql"]))
    shown = lambda p: str(p).replace(str(ROOT) + "/", "")  # noqa: E731
    lines = [f"The `{args.check}` check replayed on {len(runs)} eval runs ({shown(args.runs)}"
             + (f", without {', '.join(skip)}" if skip else "") + f") and the right statements of {shown(args.records)}", "",
             f"| recorded | n | flagged by `{args.check}` |", "|---|---|---|",
             f"| right answers (gold rows or every key fact) | {counts['right']} | {share(counts['right_flagged'], counts['right'])} |",
             f"| wrong answers | {counts['wrong']} | {share(counts['wrong_flagged'], counts['wrong'])} |",
             f"| right statements of the SQL writer | {statements} | {share(statements_flagged, statements)} |",
             f"| unanswerable, answered unflagged (of {counts['unanswerable']} with a statement that ran) | "
             f"{counts['open']} | {share(counts['caught'], counts['open'])} |", ""]
    lines += [f"- flagged right answer: {f}" for f in flagged_right]
    lines += [f"- caught: {c}" for c in caught]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
