"""Dropping a join that only repeats rows, replayed on recorded SQL statements (no model call).

Not built: 5 better, 0 worse over 280 statements of seven splits written after its code, p = 0.06
(benchmarks/results/idle_joins.md).

    python benchmarks/idle_joins.py --index-dir $SIEVE_HOME/demo/ops/index --golden golden/ops_sql_blind.jsonl \
        --records benchmarks/results/sql_drills_records.jsonl --run benchmarks/results/eval-ops-sqlblind6-xeon \
        --out benchmarks/results/idle_joins.md

For every item with a gold result: the statement recorded for it (``--records``: the plain SQL writer's first
statement, variant ``sql`` of benchmarks/data_route.py; ``--run``: the statement whose rows a ``rag eval`` run's
answer read), run through the guard as written and as benchmarks/sql_trim.drop_idle_joins leaves it (as an agent
with it would run it: the statement without the join when that runs, else as written), each compared with the gold
rows. Per source and pooled: right before and after, paired (McNemar, exact), and every statement it changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.sql_trim import drop_idle_joins, ran_statement  # noqa: E402
from benchmarks.tables import emit, share, shown_path  # noqa: E402


def recorded(args: argparse.Namespace, gold: dict[str, dict]) -> list[tuple[str, str, str | None, list]]:
    """(source, item id, statement or None, gold rows) for every item the sources hold, in their order."""
    from rag.eval.runs import read_records

    out = []
    for path in args.records:
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec.get("role") == "sql" and rec.get("variant") == "sql" and rec["id"] in gold:
                out.append((path.name, rec["id"], rec.get("sql") or None, gold[rec["id"]]["gold_result"]))
    for run in args.run:
        for rec in read_records(run):
            rows = (rec.get("data_gold") or {}).get("gold_result")
            if rows:
                out.append((run.name, rec["id"], ran_statement(rec)[0], rows))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--golden", type=Path, required=True, help="where the --records items' gold rows are")
    parser.add_argument("--records", type=Path, action="append", default=[], help="benchmarks/data_route.py records")
    parser.add_argument("--run", type=Path, action="append", default=[], help="a finished rag eval run")
    parser.add_argument("--splits", default="", help="only items of these splits (comma-separated); empty: all")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.data import Warehouse
    from rag.data.sqlrepair import columns_of
    from rag.errors import DataError
    from rag.eval.data_metrics import same_rows
    from rag.eval.golden import load_golden
    from rag.stats.intervals import mcnemar

    splits = {s for s in args.splits.split(",") if s}
    gold = {i.id: {"gold_result": i.meta.get("gold_result"), "question": i.question, "split": i.split}
            for i in load_golden(args.golden) if i.meta.get("gold_result") is not None}
    schema = columns_of(json.loads((args.index_dir / "manifest.json").read_text())["tables"])
    warehouse = Warehouse(args.index_dir / "tables.duckdb")

    def right(sql: str | None, rows: list) -> bool | None:
        if not sql:
            return False
        try:
            return same_rows(warehouse.run(sql, time_limit_s=5.0, max_rows=50).to_dict()["rows"], rows)
        except DataError:
            return None  # did not run

    per: dict[str, tuple[list[float], list[float]]] = {}
    changed = []
    for source, item, sql, rows in recorded(args, gold):
        if splits and gold.get(item, {}).get("split") not in splits:
            continue
        was = bool(right(sql, rows))
        now = was
        cut = drop_idle_joins(sql, schema) if sql else None
        if cut is not None:
            after = right(cut.sql, rows)
            if after is not None:  # the agent runs the statement as written when the one without the join fails
                now = after
                changed.append(f"- `{source}` {item} ({'right' if was else 'wrong'} -> {'right' if now else 'wrong'}): "
                               f"{gold[item]['question']}  \n  `{sql}`  \n  {'; '.join(cut.changes)}")
        a, b = per.setdefault(source, ([], []))
        a.append(float(was))
        b.append(float(now))
    lines = ["# Dropping a join that only repeats rows, replayed on recorded statements (no model call)", "",
             f"Command: `python benchmarks/idle_joins.py --index-dir {shown_path(args.index_dir)} --golden "
             f"{shown_path(args.golden)}" + "".join(f" --records {shown_path(p)}" for p in args.records)
             + "".join(f" --run {shown_path(r)}" for r in args.run)
             + (f" --splits {args.splits}" if splits else "") + "`", "",
             "| source | items | right as written | right without the idle join | better / worse | p (McNemar) |",
             "| --- | --- | --- | --- | --- | --- |"]
    pooled: tuple[list[float], list[float]] = ([], [])
    for source, (a, b) in [*per.items(), ("pooled", pooled)]:
        if source != "pooled":
            pooled[0].extend(a)
            pooled[1].extend(b)
        worse, better, p = mcnemar(a, b)
        lines.append(f"| {'**pooled**' if source == 'pooled' else f'`{source}`'} | {len(a)} | {share(int(sum(a)), len(a))} "
                     f"| {share(int(sum(b)), len(b))} | {better} / {worse} | {p:.3f} |")
    lines += ["", "## The statements it changed", "", *(changed or ["(none)"])]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
