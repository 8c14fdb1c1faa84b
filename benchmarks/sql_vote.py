"""Execution-guided voting for the SQL writer: does writing several statements and keeping the most common result help?

    python benchmarks/sql_vote.py --index-dir $SIEVE_HOME/demo/ops/index --golden GOLDEN --splits train,dev \
        --records runs/sql_vote.jsonl [--samples 4] [--out benchmarks/results/sql_vote.md]

Per item with a ``gold_result``: the SQLWriter (signatures.SQLWriter, the embedded model, cache off) writes one
statement at temperature 0, as the agent does, and ``--samples`` more at temperature 0.7 (seeds 1..N); a "both"
item's writer reads its gold passages. Each statement runs as the agent runs it: through the guard, and when DuckDB
refuses it, once more after the schema repairs (rag.data.sqlrepair); the model's own correction is left out. Then
per variant: ``greedy`` (the first statement), ``voteK`` (of the first K statements, the result most of them
returned, numbers at one decimal, ties to the earliest; none ran: the first), and ``any`` (some statement returned
the gold rows: the ceiling of any chooser). Calls are appended to ``--records`` and reused on a rerun.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import emit  # noqa: E402
from rag.stats.intervals import compare_paired, wilson  # noqa: E402


def _key(rows: list | None) -> tuple | None:
    """A result as a comparable value: rows in any order, cells in any order, numbers at one decimal."""
    if not rows:
        return None

    def cell(v):
        try:
            return round(float(v), 1)
        except (TypeError, ValueError):
            return str(v).strip().lower()
    return tuple(sorted(tuple(sorted(map(cell, row), key=repr)) for row in rows))


def vote(results: list[list | None]) -> int:
    """The index of the statement whose result most of ``results`` share (ties: the earliest; none ran: 0)."""
    keys = [_key(r) for r in results]
    counts = Counter(k for k in keys if k is not None)
    if not counts:
        return 0
    best = max(counts.values())
    return next(i for i, k in enumerate(keys) if k is not None and counts[k] == best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--golden", type=Path, required=True)
    parser.add_argument("--splits", default="train,dev")
    parser.add_argument("--samples", type=int, default=4, help="statements sampled beyond the first")
    parser.add_argument("--records", type=Path, default=ROOT / "runs" / "sql_vote.jsonl")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import dspy

    from rag.agent.dataroute import clean_sql, documents_text
    from rag.config import load_settings
    from rag.data import Warehouse, schema_summary
    from rag.data.sqlrepair import columns_of, repair_sql
    from rag.errors import DataError
    from rag.eval.data_metrics import same_rows
    from rag.eval.golden import gold_chunk_ids, load_golden
    from rag.index.store import Index
    from rag.lm.configure import build_lm, configure_dspy
    from rag.retrieval.retriever import Hit
    from rag.usage.metering import metered_call
    from signatures import SQLWriter

    settings = load_settings({"index_dir": args.index_dir, "cache": False})
    configure_dspy(settings)
    index = Index.load(args.index_dir, settings)
    schema, warehouse, columns = schema_summary(index.tables_record), Warehouse(index.tables_path), columns_of(index.tables_record)
    lm, write = build_lm("embedded", settings), dspy.Predict(SQLWriter)
    splits = [s for s in args.splits.split(",") if s]
    items = [i for i in load_golden(args.golden) if i.split in splits and i.meta.get("gold_result") is not None]
    done = {(r["id"], r["k"]): r for r in map(json.loads, args.records.read_text().splitlines())} \
        if args.records.is_file() else {}
    args.records.parent.mkdir(parents=True, exist_ok=True)

    def run(sql: str) -> list | None:
        for attempt in (sql, None):
            if attempt is None:
                fixed = repair_sql(sql, columns)
                if fixed is None:
                    return None
                attempt = fixed.sql
            try:
                return warehouse.run(attempt, time_limit_s=5.0, max_rows=50).to_dict()["rows"]
            except DataError:
                continue
        return None

    outcome: dict[str, list[bool]] = {}
    returned: dict[str, list[list | None]] = {}
    for n, item in enumerate(items, 1):
        gold = sorted(gold_chunk_ids(item, index.chunks)) if item.meta["route"] == "both" else []
        documents = documents_text([Hit(chunk_id=c, text=index.by_id[c].text, title="", source="", rank=0, score=0.0,
                                        stages={}) for c in gold])
        for k in range(args.samples + 1):
            if (item.id, k) not in done:
                config = {"config": {"temperature": 0.7, "seed": k}} if k else {}
                start = time.perf_counter()
                pred, _ = metered_call(write, lm, question=item.question, tables=schema, documents=documents,
                                       previous="", **config)
                done[(item.id, k)] = rec = {"id": item.id, "k": k, "sql": clean_sql(pred.sql),
                                            "seconds": round(time.perf_counter() - start, 2)}
                with args.records.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(rec) + "\n")
        results = [run(done[(item.id, k)]["sql"]) if done[(item.id, k)]["sql"] else None for k in range(args.samples + 1)]
        right = [r is not None and same_rows(r, item.meta["gold_result"]) for r in results]
        outcome[item.id], returned[item.id] = right, results
        print(f"{n}/{len(items)} {item.id}: greedy {'right' if right[0] else 'wrong'}, {sum(right)} of "
              f"{len(right)} right", file=sys.stderr, flush=True)

    names = ["greedy", *(f"vote{k}" for k in sorted({3, args.samples + 1}) if 1 < k <= args.samples + 1)]
    lines = [f"# Execution-guided voting for the SQL writer: {args.golden.name}, splits {args.splits}", "",
             f"Command: `python benchmarks/sql_vote.py --index-dir $SIEVE_HOME/demo/ops/index --golden {args.golden.name} "
             f"--splits {args.splits} --samples {args.samples}`", "",
             "| variant | statements per question | gold rows | paired with greedy (McNemar) |", "|---|---|---|---|"]
    greedy = [float(outcome[i.id][0]) for i in items]
    for name in names:
        if name == "greedy":
            got = greedy
        else:
            k = int(name[4:])
            got = [float(outcome[i.id][vote(returned[i.id][:k])]) for i in items]
        lo, hi = wilson(int(sum(got)), len(got)) or (0.0, 0.0)
        c = compare_paired(greedy, got)
        lines.append(f"| {name} | {1 if name == 'greedy' else name[4:]} | {int(sum(got))}/{len(got)}, "
                     f"{sum(got) / len(got):.1%} [{lo:.1%}, {hi:.1%}] | "
                     f"{'-' if name == 'greedy' else f'{c.only_b} better, {c.only_a} worse, p={c.p:.2f}'} |")
    ceiling = sum(any(outcome[i.id]) for i in items)
    lines += [f"| any (ceiling) | {args.samples + 1} | {ceiling}/{len(items)} | - |", ""]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
