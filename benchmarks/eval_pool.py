"""Two sets of ``rag eval`` runs compared item by item, pooled: runs of several splits under one configuration
against runs of the same splits under another, as ``rag report`` compares two runs.

Run: python benchmarks/eval_pool.py --a benchmarks/results/eval-ops-sqlblind12-xeon benchmarks/results/eval-ops-sqlblind13-xeon
                                    --b benchmarks/results/eval-ops-sqlblind12-today benchmarks/results/eval-ops-sqlblind13-today
                                    [--names before,today] [--by-route] [--out FILE]

The records of each side are pooled (an item id appears once per side) and paired by id (rag.stats.paired: McNemar
for shares, a sign-flip test for means), so a change measured split by split gets one figure with one interval. ``--by-route`` adds the same table for
the items of each gold route (``data_gold.route``: data, both), after the pooled one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit, shown_path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", nargs="+", type=Path, required=True, help="run folders of the first configuration")
    parser.add_argument("--b", nargs="+", type=Path, required=True, help="run folders of the second, same splits")
    parser.add_argument("--names", default="A,B", help="the two sides' names, comma-separated")
    parser.add_argument("--by-route", action="store_true", help="also one table per gold route (data, both)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here (Markdown)")
    args = parser.parse_args()

    from rag.eval.runs import read_records
    from rag.stats.paired import compare_records, render

    name_a, _, name_b = args.names.partition(",")
    name_b = name_b or "B"
    sides = []
    for runs in (args.a, args.b):
        records = {}
        for run in runs:
            for record in read_records(run):
                if record["id"] in records:
                    sys.exit(f"error: item {record['id']} is in two runs of one side ({run}); give each split once")
                records[record["id"]] = record
        sides.append(list(records.values()))
    shared = len({r["id"] for r in sides[0]} & {r["id"] for r in sides[1]})
    lines = [f"{name_a}: {', '.join(shown_path(r) for r in args.a)}", "",
             f"{name_b}: {', '.join(shown_path(r) for r in args.b)}", "", f"{shared} items in both.", "",
             *render(compare_records(sides[0], sides[1], name_a, name_b), name_a, name_b)]
    for route in sorted({_route(r) for r in sides[0]} - {None}) if args.by_route else []:
        mine = [[r for r in side if _route(r) == route] for side in sides]
        lines += ["", f"### Gold route `{route}`", "", *render(compare_records(*mine, name_a, name_b), name_a, name_b)]
    emit(lines, args.out)


def _route(record: dict) -> str | None:
    """A record's gold route (data, both), None for an item without one."""
    return (record.get("data_gold") or {}).get("route")


if __name__ == "__main__":
    main()
