"""The SQL writer's statements as the agent runs them, with the schema repair and without, from data_route records.

Run: python benchmarks/sql_agent_path.py --records benchmarks/results/sql_repair_records.jsonl
                                         --golden golden/ops_sql_blind.jsonl [--splits blind30,blind31]
                                         [--first sql+names+short+paths@text]
                                         [--correction sql+names+short+paths+correct@text]
                                         [--before d1dc8aa] [--out benchmarks/results/sql_repair.md]

The records come from benchmarks/data_route.py (``--sql FIRST --correct CORRECTION --correct-after FIRST``): the
writer's first statement per question and, where it failed, its one correction. No model is called here. Each
question is scored as rag.agent.dataroute runs it: the first statement; when DuckDB or the guard refuses it, the
statement rag.data.sqlrepair makes of it; when there is none or it fails too, the correction, repaired the same way
when it fails. Arms: ``none`` (no repair), ``repair`` (this checkout's rag.data.sqlrepair) and, with ``--before REV``,
``before`` (rag/data/sqlrepair.py as committed at REV), each paired against the last (McNemar, exact).
benchmarks/sql_repairs.py replays the failed statements of ``rag eval`` runs instead, statement by statement. A repair only runs on a statement that failed, so it can cost a question only by
running a wrong statement where the correction would have been right.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.router_rounds import module_at  # noqa: E402
from benchmarks.tables import emit, share, shown_path  # noqa: E402


def agent_path(first: dict, correction: dict | None, repair: Callable | None, columns: dict,
               run: Callable) -> tuple[bool, bool]:
    """(whether the agent's data route ends on the gold rows, whether a repaired statement ran on the way) as the
    module's docstring says, with ``repair`` (None: none)."""
    for rec in (first, correction):
        if rec is None or not rec.get("sql"):
            return False, False
        if not rec.get("error"):
            return bool(rec["right"]), False
        fixed = repair(rec["sql"], columns) if repair is not None else None
        if fixed is not None and (outcome := run(fixed.sql)) is not None:
            return outcome, True
    return False, False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, required=True, help="benchmarks/data_route.py's --records")
    parser.add_argument("--golden", type=Path, required=True, help="the golden set the records were run on")
    parser.add_argument("--index-dir", default=None, help="the index holding the tables (default: the demo's)")
    parser.add_argument("--splits", default="", help="comma-separated splits (default: every split in the records)")
    parser.add_argument("--first", default="sql+names+short+paths@text", help="the first statement's variant")
    parser.add_argument("--correction", default="sql+names+short+paths+correct@text", help="the correction's variant")
    parser.add_argument("--before", default=None, help="a commit whose rag/data/sqlrepair.py is compared")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here (Markdown)")
    args = parser.parse_args()

    from rag.config import load_settings
    from rag.data import Warehouse
    from rag.data.sqlrepair import columns_of, repair_sql
    from rag.errors import DataError
    from rag.eval.data_metrics import same_rows
    from rag.eval.golden import load_golden
    from rag.index.store import Index
    from rag.paths import sieve_home
    from rag.stats.intervals import mcnemar

    index_dir = args.index_dir or str(sieve_home() / "demo" / "ops" / "index")
    index = Index.load(index_dir, load_settings({"index_dir": index_dir}))
    columns, warehouse = columns_of(index.tables_record), Warehouse(index.tables_path)
    gold = {i.id: i.meta["gold_result"] for i in load_golden(args.golden) if i.meta.get("gold_result") is not None}
    records = [json.loads(line) for line in args.records.read_text().splitlines() if line.strip()]
    firsts = {r["id"]: r for r in records if r["role"] == "sql" and r["variant"] == args.first}
    corrections = {r["id"]: r for r in records if r["role"] == "correct" and r["variant"] == args.correction}
    splits = [s for s in args.splits.split(",") if s] or sorted({r["split"] for r in firsts.values()})
    ids = [i for i, r in firsts.items() if r["split"] in splits and i in gold]
    missing = [i for i in ids if firsts[i].get("error") and i not in corrections]
    if missing:
        sys.exit(f"error: {len(missing)} failed first statements have no {args.correction} record "
                 f"(e.g. {missing[0]}); run benchmarks/data_route.py with --correct {args.correction}")

    def run_for(item_id: str) -> Callable[[str], bool | None]:
        def run(sql: str) -> bool | None:
            try:
                return same_rows(warehouse.run(sql, time_limit_s=5.0, max_rows=50).to_dict()["rows"], gold[item_id])
            except DataError:
                return None
        return run

    arms = {"none": None, **({"before": module_at(args.before, "rag/data/sqlrepair.py").repair_sql} if args.before else {}),
            "repair": repair_sql}
    paths = {arm: [agent_path(firsts[i], corrections.get(i), fn, columns, run_for(i)) for i in ids]
             for arm, fn in arms.items()}
    right = {arm: [r for r, _ in outcomes] for arm, outcomes in paths.items()}
    lines = [f"SQL writer `{args.first}` with its correction `{args.correction}`, scored as the agent runs them, "
             f"on {', '.join(splits)} of {shown_path(args.golden)}" + (f"; `before` = the repair of commit {args.before}" if args.before else ""),
             "", "| arm | split | n | gold rows | first statement failed | a repaired statement ran |", "|---|---|---|---|---|---|"]
    for arm in arms:
        for split in [*splits, "all"] if len(splits) > 1 else splits:
            mine = [k for k, i in enumerate(ids) if split in ("all", firsts[i]["split"])]
            failed = sum(bool(firsts[ids[k]].get("error")) for k in mine)
            ran = sum(paths[arm][k][1] for k in mine)
            lines.append(f"| {arm} | {split} | {len(mine)} | {share(sum(right[arm][k] for k in mine), len(mine))} "
                         f"| {failed} | {ran} |")
    last = list(arms)[-1]
    lines += ["", f"Paired against `{last}` (McNemar, exact):", "", "| arm | better with " + last + " | worse | p |",
              "|---|---|---|---|"]
    for arm in list(arms)[:-1]:
        worse, better, p = mcnemar(right[arm], right[last])
        lines.append(f"| {arm} | {better} | {worse} | {p:.3f} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
