"""The schema repairs at an earlier commit against today's, replayed on every statement a recorded ops run saw fail.

    python benchmarks/sql_repairs.py --index-dir $SIEVE_HOME/demo/ops/index --before 1a2b3c4 \
        --out benchmarks/results/sql_repairs.md

No model call. Every distinct statement (per question) that DuckDB refused in a finished ``rag eval`` run of the
ops demo (``--runs``: run folders, default benchmarks/results/eval-ops*) is repaired by ``rag/data/sqlrepair.py`` as it was at
``--before`` (read with ``git show``) and as it is in the working tree, guarded and run. Counted are the statements
only today's repairs make run: on answerable items, whether they return the item's gold rows; on unanswerable items,
whether the critic's columns or filters check (rag.data.coverage) would still flag an answer citing them, since a
query that runs there turns a refusal into an answer. benchmarks/sql_agent_path.py scores benchmarks/data_route.py's
records instead, each question as the agent runs it (first statement, repair, correction).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.router_rounds import module_at  # noqa: E402
from benchmarks.tables import emit, shown_path  # noqa: E402

MODULE = "rag/data/sqlrepair.py"
KINDS = ("answerable, gold rows", "answerable, other rows", "unanswerable, still flagged", "unanswerable, unflagged")


def failed_statements(runs: list[Path]) -> list[tuple[str, dict, str]]:
    """(run name, record, statement) for each distinct statement per question that DuckDB refused in ``runs``."""
    from rag.eval.runs import read_records

    seen, found = set(), []
    for run in runs:
        for record in read_records(run):
            for step in ((record.get("prediction") or {}).get("trace") or {}).get("steps", []):
                sql = step.get("sql")
                if step["node"] != "sql" or step.get("result") or not sql:
                    continue
                if not str(step.get("reason") or "").startswith("duckdb") or (record["question"], sql) in seen:
                    continue
                seen.add((record["question"], sql))
                found.append((run.name, record, sql))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-dir", type=Path, required=True, help="the ops demo's index (rag demo ops)")
    parser.add_argument("--before", required=True, help="the commit whose repairs are compared with today's")
    parser.add_argument("--runs", nargs="*", type=Path, help="finished run folders (default: benchmarks/results/eval-ops*)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.config import load_settings
    from rag.data import Warehouse
    from rag.data import sqlrepair as today
    from rag.data.coverage import Coverage
    from rag.data.schemalink import Vocabulary
    from rag.data.sqlguard import check_sql
    from rag.eval.data_metrics import same_rows
    from rag.index.store import Index

    index = Index.load(args.index_dir, load_settings({"index_dir": args.index_dir}))
    warehouse = Warehouse(index.tables_path)
    coverage = Coverage.for_index(index, warehouse, Vocabulary.for_index(index, warehouse))
    columns = today.columns_of(index.tables_record)
    before = module_at(args.before, MODULE)

    def repaired(module: ModuleType, sql: str) -> tuple[str, object | None]:
        fixed = module.repair_sql(sql, columns)
        if fixed is None:
            return "", None
        try:
            return fixed.sql, warehouse.run(check_sql(fixed.sql, warehouse.tables, 50))
        except Exception:  # noqa: BLE001 - a repaired statement that still fails is counted as failing
            return fixed.sql, None

    runs = args.runs or sorted(p.parent for p in (ROOT / "benchmarks/results").glob("eval-ops*/results.jsonl"))
    statements = failed_statements(runs)
    counts: Counter[str] = Counter()
    rows = []
    for run, record, sql in statements:
        if repaired(before, sql)[1] is not None:
            continue
        fixed, result = repaired(today, sql)
        if result is None:
            continue
        gold = (record.get("data_gold") or {}).get("gold_result")
        if record.get("should_refuse"):
            flagged = coverage.unasked(record["question"], result.sql) or coverage.invented(record["question"], result.sql, "")
            kind = KINDS[2] if flagged else KINDS[3]
        else:
            kind = KINDS[0] if gold is not None and same_rows(result.rows, gold) else KINDS[1]
        counts[kind] += 1
        rows.append(f"- {kind}: `{record['id']}` ({run}): `{' '.join(sql.split())[:160]}` -> `{fixed[:220]}`")

    lines = ["# Schema repairs before and after a round, on the statements recorded runs saw fail", "",
             f"Command: `python benchmarks/sql_repairs.py --index-dir {shown_path(args.index_dir)} --before {args.before}"
             + (f" --out {shown_path(args.out)}`" if args.out else "`"), "",
             f"`before`: {MODULE} at {args.before}; `today`: the working tree's. No model call. {len(statements)} distinct "
             f"failing statements in {len(runs)} runs.", "",
             "| statements only today's repairs make run | n |", "|---|---|",
             *[f"| {kind} | {counts[kind]} |" for kind in KINDS], "", "Each of them:", "", *rows]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
