"""Trimming from the SQL writer's statement what the question never asked for, replayed on finished runs.

Not built: no gain on the splits it was not written against (benchmarks/results/sql_trim.md).

    python benchmarks/sql_trim.py --index-dir $SIEVE_HOME/demo/ops/index \
        --run benchmarks/results/eval-ops-sqlblind2-default ... --out benchmarks/results/sql_trim.md

A 1.5B writer pads a right query with two kinds of extra that run without an error and return a plausible wrong
number: a join that only multiplies rows (the average credit limit of pharma customers taken over every shipment of
theirs: ``FROM shipments T1 JOIN customers T2 ON ... SELECT AVG(T2.credit_limit_eur)``), and a condition on a value
nobody named (``T2.region = 'Central'``, copied from the example values the schema summary shows). :func:`trim_sql`
removes both on sqlglot's AST:

- a joined table none of whose columns is read anywhere but in its own join condition (a bridge that another
  join's condition reads is read) leaves the query, when exactly one table is idle so and the query has neither
  DISTINCT ("customers who shipped something": the join is the point) nor ``COUNT(*)`` ("shipments per carrier":
  the repeated rows are what it counts); when that table was the one in FROM, the next one takes its place;
- a comparison of a column with text (``=``, ``<>``, ``IN``, ``LIKE``) that is one of the parts of a WHERE's AND
  chain is dropped when its text is grounded neither in the question nor in the passages the writer was shown:
  each of its words is one of theirs, or starts with the same five letters as one (``Belgium``/Belgian), ``_``
  read as a space. Text with a digit in it (a date, an id such as ``C01`` the writer looked up), numbers, booleans
  and conditions under OR or NOT are left alone; an IN list keeps its grounded values.

The replay: for every item with a gold result, the statement that ran (the last ``sql`` step that returned rows) is
trimmed with the question and the passages the writer was shown (the answer's passages, from the index), run
through the guard on the index's tables, and compared with the gold rows, as an agent with the trim would have run
it: the trimmed statement when it runs, else the statement as written. Per run: execution accuracy as recorded and
trimmed, paired (McNemar, exact), and every statement the trim changed with its verdict before and after.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlglot  # noqa: E402
from sqlglot import exp  # noqa: E402
from sqlglot.errors import SqlglotError  # noqa: E402

from benchmarks.tables import emit, share, shown_path  # noqa: E402
from rag.data.schemalink import words  # noqa: E402

PREFIX = 5  # letters two words must share at the start to count as one (Belgium ~ Belgian)


@dataclass
class Trim:
    sql: str  # the trimmed statement
    changes: list[str] = field(default_factory=list)  # one line per cut, for the report


def trim_sql(sql: str, schema: dict[str, dict[str, str]], grounds: str = "", *, conditions: bool = True) -> Trim | None:
    """The statement without its idle joins and its ungrounded text conditions (see the module's docstring), or
    None when it has neither. ``schema`` is rag.data.sqlrepair.columns_of's; ``grounds`` the question and the
    passages the writer read; ``conditions=False``: the idle joins alone."""
    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except SqlglotError:
        return None
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        return None
    tree = trees[0]
    changes: list[str] = []
    said = set(words(grounds))
    for where in list(tree.find_all(exp.Where)) if conditions else []:
        _drop_ungrounded(where, said, changes)
    if tree.find(exp.Distinct) is None and not _counts_rows(tree):
        for select in list(tree.find_all(exp.Select)):
            _drop_idle_join(select, tree, schema, changes)
    return Trim(tree.sql(dialect="duckdb"), changes) if changes else None


def drop_idle_joins(sql: str, schema: dict[str, dict[str, str]]) -> Trim | None:
    """The idle-join half of :func:`trim_sql` alone: the statement without a joined table none of whose columns it
    reads outside that table's own join condition (no DISTINCT, no ``COUNT(*)``), or None when there is none.
    Replayed by benchmarks/idle_joins.py; not built (benchmarks/results/idle_joins.md)."""
    return trim_sql(sql, schema, conditions=False)


def _counts_rows(tree: exp.Expression) -> bool:
    """Whether the query counts rows (``COUNT(*)``, ``COUNT(1)``): there a join's repeated rows are what it counts."""
    return any(isinstance(c.this, exp.Star) or isinstance(c.this, exp.Literal) for c in tree.find_all(exp.Count))


def grounded(text: str, said: set[str]) -> bool:
    """Whether every word of ``text`` is a word of ``said`` or shares its first PREFIX letters with one."""
    own = words(text)
    starts = {w[:PREFIX] for w in said if len(w) >= PREFIX}
    return bool(own) and all(w in said or (len(w) >= PREFIX and w[:PREFIX] in starts) for w in own)


def _drop_ungrounded(where: exp.Where, said: set[str], changes: list[str]) -> None:
    for part in _and_parts(where.this):
        texts = _compared_texts(part)
        if texts is None:
            continue
        keep = [t for t in texts if grounded(t.this, said)]
        if len(keep) == len(texts):
            continue
        if keep and isinstance(part, exp.In):
            part.set("expressions", keep)
            changes.append(f"kept only {', '.join(repr(t.this) for t in keep)} in {part.this.sql()} IN (...): "
                           "the other values are not in the question")
            continue
        changes.append(f"dropped {part.sql(dialect='duckdb')}: {texts[0].this!r} is not in the question")
        _remove(part, where)


def _and_parts(node: exp.Expression) -> list[exp.Expression]:
    """The parts of an AND chain (through parentheses); a lone condition is its own one part."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _and_parts(node.left) + _and_parts(node.right)
    return [node]


def _compared_texts(part: exp.Expression) -> list[exp.Literal] | None:
    """The text literals a column is compared with in ``part`` (col = 'x', col IN ('x', 'y'), ...), or None."""
    if isinstance(part, exp.In) and isinstance(part.this, exp.Column) and part.expressions:
        values = part.expressions
    elif isinstance(part, (exp.EQ, exp.NEQ, exp.Like, exp.ILike)):
        column, value = (part.this, part.expression) if isinstance(part.this, exp.Column) else (part.expression, part.this)
        if not isinstance(column, exp.Column):
            return None
        values = [value]
    else:
        return None
    if not all(isinstance(v, exp.Literal) and v.is_string and not any(ch.isdigit() for ch in v.this) for v in values):
        return None
    return list(values)


def _remove(part: exp.Expression, where: exp.Where) -> None:
    """Take ``part`` out of its AND chain; the WHERE goes when it was the only condition."""
    node = part
    while isinstance(node.parent, exp.Paren):
        node = node.parent
    parent = node.parent
    if isinstance(parent, exp.And):
        other = parent.right if node is parent.left else parent.left
        parent.replace(other)
    else:
        where.pop()


def _drop_idle_join(select: exp.Select, tree: exp.Expression, schema: dict[str, dict[str, str]],
                    changes: list[str]) -> None:
    joins = list(select.args.get("joins") or [])
    source = select.args.get("from_") or select.args.get("from")
    if not joins or source is None or any(isinstance(e, exp.Star) for e in select.expressions):
        return
    tables = [source.this, *(j.this for j in joins)]
    if not all(isinstance(t, exp.Table) and t.name for t in tables) or any(j.args.get("on") is None for j in joins):
        return
    ons = [j.args["on"] for j in joins]
    idle = []
    for i, table in enumerate(tables):
        linked = _links(table, tables, tree, ons, schema)
        if linked is not None and (i > 0 and linked is ons[i - 1] or i == 0 and linked is ons[0]):
            idle.append(i)
    if len(idle) != 1:
        return
    i = idle[0]
    if i == 0:
        source.set("this", joins[0].this.copy())
    joins[max(i - 1, 0)].pop()
    changes.append(f"dropped the join of {tables[i].name}: none of its columns is read, it only repeats rows")


def _key(table: exp.Table) -> str:
    return (table.alias_or_name or table.name).lower()


def _links(table: exp.Table, tables: list[exp.Table], tree: exp.Expression, ons: list[exp.Expression],
           schema: dict[str, dict[str, str]]) -> exp.Expression | None:
    """The one join condition that reads ``table``'s columns when nothing else in the query reads them and that
    condition is equalities of columns; None when the table is read, or linked by more than one condition."""
    key, own = _key(table), schema.get(table.name.lower(), {})
    others = {t.name.lower() for t in tables if t is not table}
    found = set()
    for column in tree.find_all(exp.Column):
        name = column.name.lower()
        if column.table:
            mine = column.table.lower() == key
        else:  # unqualified: the table's when no other table of the query has such a column
            mine = name in own and not any(name in schema.get(o, {}) for o in others)
        if not mine:
            continue
        on = next((o for o in ons if _inside(column, o)), None)
        if on is None:
            return None
        found.add(id(on))
    if len(found) != 1:
        return None
    on = next(o for o in ons if id(o) in found)
    if not all(isinstance(p, exp.EQ) and isinstance(p.this, exp.Column) and isinstance(p.expression, exp.Column)
               for p in _and_parts(on)):
        return None
    return on


def _inside(node: exp.Expression, ancestor: exp.Expression) -> bool:
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False



def ran_statement(record: dict) -> tuple[str | None, list[str]]:
    """(the statement whose rows the answer read, the non-SQL passage ids the answer was shown)."""
    steps = ((record.get("prediction") or {}).get("trace") or {}).get("steps") or []
    sql = next((s.get("sql") for s in reversed(steps) if s.get("node") == "sql" and s.get("result")), None)
    shown = next((s.get("shown_ids") or [] for s in reversed(steps) if s.get("node") == "answer"), [])
    return sql, [i for i in shown if not str(i).startswith("sql:")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--run", type=Path, action="append", required=True, help="a finished rag eval run; repeatable")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from rag.agent.dataroute import documents_text
    from rag.data import Warehouse
    from rag.data.sqlrepair import columns_of
    from rag.errors import DataError
    from rag.eval.data_metrics import same_rows
    from rag.eval.runs import read_records
    from rag.ingest.chunking import load_chunks_jsonl
    from rag.stats.intervals import mcnemar

    chunks = {c.id: SimpleNamespace(chunk_id=c.id, text=c.text) for c in load_chunks_jsonl(args.index_dir / "chunks.jsonl")}
    schema = columns_of(json.loads((args.index_dir / "manifest.json").read_text())["tables"])
    warehouse = Warehouse(args.index_dir / "tables.duckdb")

    def rows(sql: str) -> list | None:
        try:
            return warehouse.run(sql, time_limit_s=5.0, max_rows=50).rows
        except DataError:
            return None

    lines = ["# The SQL trim replayed on ops runs made without it (no model call)", "",
             f"Command: `python benchmarks/sql_trim.py --index-dir {shown_path(args.index_dir)} "
             + " ".join(f"--run {shown_path(r)}" for r in args.run) + "`", "",
             "| run | items with gold rows | a statement ran | trimmed | execution accuracy: recorded | trimmed "
             "| better / worse | p (McNemar) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    details: list[str] = []
    for run in args.run:
        before, after, n_ran, n_trimmed = [], [], 0, 0
        for rec in read_records(run):
            gold = (rec.get("data_gold") or {}).get("gold_result")
            if not gold:
                continue
            sql, shown = ran_statement(rec)
            was = bool(((rec.get("scores") or {}).get("data") or {}).get("exec_correct"))
            now = was
            if sql:
                n_ran += 1
                hits = [chunks[i] for i in shown if i in chunks]
                grounds = rec["question"] + "\n" + documents_text(hits)
                cut = trim_sql(sql, schema, grounds)
                got = rows(cut.sql) if cut else None
                if cut and got is not None:
                    n_trimmed += 1
                    now = same_rows(got, gold)
                    details.append(f"- `{run.name}` {rec['id']} ({'right' if was else 'wrong'} -> "
                                   f"{'right' if now else 'wrong'}): {rec['question']}  \n  `{sql}`  \n  "
                                   + "; ".join(cut.changes))
            before.append(float(was))
            after.append(float(now))
        worse, better, p = mcnemar(before, after)
        lines.append(f"| `{run.name}` | {len(before)} | {n_ran} | {n_trimmed} | {share(int(sum(before)), len(before))} "
                     f"| {share(int(sum(after)), len(after))} | {better} / {worse} | {p:.3f} |")
    lines += ["", "## The statements the trim changed", "", *details]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
