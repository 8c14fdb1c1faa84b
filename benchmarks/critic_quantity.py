"""The critic's ``quantity`` check (rag.agent.stated) replayed on recorded answers: how many right answers it would
flag, and how many unanswerable questions it would catch that were answered unflagged. No model call.

Run: python benchmarks/critic_quantity.py [--runs 'benchmarks/results/eval-ops-*'[,GLOB...]] [--skip unanswerable]
                                          [--besides period] [--out FILE]

From each ``rag eval`` run folder (``results.jsonl``): each answered item's final answer, judged as the critic
judges it, only when it cites no query result. An answerable item is right when its statement returned the gold
rows or its answer states every key fact; an unanswerable one is caught already when it was refused or flagged.
``--besides period``: an unanswerable question the period check would catch (benchmarks/critic_absent.py) is not
counted as this check's catch. Counts are of items as recorded, so a question run in several folders counts once per
run.
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
    parser.add_argument("--runs", default=str(ROOT / "benchmarks" / "results" / "eval-ops-*"),
                        help="run folders (globs, comma-separated)")
    parser.add_argument("--skip", default="", help="comma-separated substrings of run folders to leave out")
    parser.add_argument("--besides", choices=("", "period"), default="", help="leave out what this check catches")
    parser.add_argument("--index-dir", default=None, help="the index holding the tables (default: the demo's)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here (Markdown)")
    args = parser.parse_args()

    from rag.agent.stated import unstated
    from rag.paths import sieve_home

    other = _period(Path(args.index_dir or sieve_home() / "demo" / "ops" / "index")) if args.besides else None
    skip = [s for s in args.skip.split(",") if s]
    runs = sorted({d for pattern in args.runs.split(",") for d in glob.glob(pattern.strip()) if not any(s in d for s in skip)})
    counts = dict.fromkeys(["right", "right_flagged", "wrong", "wrong_flagged", "unanswerable", "open", "caught",
                            "other"], 0)
    flagged_right, caught = [], []
    for run in runs:
        for line in Path(run, "results.jsonl").read_text().splitlines():
            item = json.loads(line)
            pred, data = item.get("prediction") or {}, ((item.get("scores") or {}).get("data") or {})
            if not pred or pred.get("refused"):
                continue
            by_sql = any(s.get("sql") for s in pred.get("sources") or [])
            found = None if by_sql else unstated(item["question"], pred.get("answer") or "")
            if item.get("should_refuse"):
                counts["unanswerable"] += 1
                if pred.get("low_confidence"):
                    continue
                counts["open"] += 1
                ran = [s["sql"] for s in (pred.get("trace") or {}).get("steps", [])
                       if s.get("node") == "sql" and s.get("verdict") and s.get("sql")]
                if found and other is not None and ran and other(ran[-1]):
                    counts["other"] += 1
                elif found:
                    counts["caught"] += 1
                    caught.append(f"{Path(run).name} {item['id']} ({item['question']}): {found}")
            elif data.get("exec_correct") or data.get("key_facts_ok"):
                counts["right"] += 1
                counts["right_flagged"] += bool(found)
                if found:
                    flagged_right.append(f"{Path(run).name} {item['id']} ({item['question']}): {found}")
            else:
                counts["wrong"] += 1
                counts["wrong_flagged"] += bool(found)
    shown = lambda p: str(p).replace(str(ROOT) + "/", "")  # noqa: E731
    lines = [f"The `quantity` check replayed on {len(runs)} eval runs ({shown(args.runs)}"
             + (f", without {', '.join(skip)}" if skip else "") + ")", "",
             "| recorded, answered | n | flagged by `quantity` |", "|---|---|---|",
             f"| right answers (gold rows or every key fact) | {counts['right']} | {share(counts['right_flagged'], counts['right'])} |",
             f"| wrong answers | {counts['wrong']} | {share(counts['wrong_flagged'], counts['wrong'])} |",
             f"| unanswerable, answered unflagged (of {counts['unanswerable']} answered) | {counts['open']} | "
             f"{share(counts['caught'], counts['open'])}" + (f" (and {counts['other']} the {args.besides} check "
                                                            "catches too)" if args.besides else "") + " |", ""]
    lines += [f"- flagged right answer: {f}" for f in flagged_right]
    lines += [f"- caught: {c}" for c in caught]
    emit(lines, args.out)


def _period(index_dir: Path):
    from rag.data import Warehouse
    from rag.data.coverage import date_spans
    from rag.data.unrecorded import Unrecorded

    record = json.loads((index_dir / "manifest.json").read_text())["tables"]
    with Warehouse(index_dir / "tables.duckdb") as warehouse:
        return Unrecorded.from_record(record, {}, date_spans(record, warehouse)).outside


if __name__ == "__main__":
    main()
