"""Schema repairs of a model's SQL: the mistakes a small model makes about *where* a column is, fixed by the schema.

A 1.5B model writes the right query with the wrong table qualifier (``T1.region`` where ``region`` is in the table
aliased ``T2``), names a table it never joined (``amount_eur > 20 * shipments.weight_kg`` with only ``claims`` in
FROM), or subtracts an interval from a date written as a string (``'2024-12-31' - INTERVAL 45 DAY``). DuckDB
rejects each with a Binder Error, and given the error the same model rewrites the same statement
(benchmarks/results/data_route_corrections.md). :func:`repair_sql` fixes these from the schema alone, on sqlglot's
AST, before the model's one correction:

- a qualified column its table lacks moves to the one table of the query that has it;
- a table named by a column but absent from FROM is joined on the one column name the two tables share
  (``claims.shipment_id = shipments.shipment_id``), when exactly one such column links them;
- an unqualified column no table of the query has comes from a table joined the same way;
- a date-shaped string in date arithmetic becomes a DATE literal, and a DATE column matched with LIKE is read as
  text (``shipped_on LIKE '2024-06%'``).

Anything else is left alone: :func:`repair_sql` returns None and the model gets the error. The repaired statement
still passes the SQL guard before it runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

DATE_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass
class Repair:
    sql: str  # the repaired statement
    changes: list[str] = field(default_factory=list)  # one line per fix, for the trace


def columns_of(record: dict[str, Any]) -> dict[str, dict[str, str]]:
    """``{table: {column: DuckDB type}}`` from a tables record (rag.data.build_database), names in lower case."""
    return {t["name"].lower(): {c["name"].lower(): str(c.get("type", "")).upper() for c in t.get("columns", [])}
            for t in record.get("tables") or []}


def repair_sql(sql: str, schema: dict[str, dict[str, str]]) -> Repair | None:
    """The statement with the schema's fixes (see the module's docstring), or None when there is nothing to fix."""
    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except SqlglotError:
        return None
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):  # two statements are the guard's to refuse
        return None
    tree = trees[0]
    changes: list[str] = []
    for select in list(tree.find_all(exp.Select)):
        _fix_select(select, schema, changes)
    _fix_dates(tree, changes)
    for select in list(tree.find_all(exp.Select)):
        _fix_like(select, schema, changes)
    return Repair(tree.sql(dialect="duckdb"), changes) if changes else None


def read_tables(select: exp.Select) -> dict[str, str]:
    """``{alias or name, lower case: table}`` of the tables this SELECT reads directly (not its subqueries')."""
    found = {}
    for node in [select.args.get("from_") or select.args.get("from"), *(select.args.get("joins") or [])]:
        table = node.this if node is not None else None
        if isinstance(table, exp.Table) and table.name:
            found[(table.alias_or_name or table.name).lower()] = table.name.lower()
    return found


def _link(table: str, sources: dict[str, str], schema: dict[str, dict[str, str]]) -> tuple[str, str] | None:
    """(alias of a table already read, the one column it shares with ``table``) when exactly one such link exists."""
    links = [(alias, col) for alias, src in sources.items() for col in set(schema.get(src, {})) & set(schema.get(table, {}))]
    if len(links) > 1:  # claims and shipments share shipment_id and status: a key is named like one
        links = [(alias, col) for alias, col in links if col.endswith("id")]
    return links[0] if len(links) == 1 else None


def _join(select: exp.Select, table: str, sources: dict[str, str], schema: dict[str, dict[str, str]],
          changes: list[str]) -> bool:
    link = _link(table, sources, schema)
    if link is None:
        return False
    alias, col = link
    select.join(exp.Table(this=exp.to_identifier(table)), on=f"{alias}.{col} = {table}.{col}", copy=False)
    sources[table] = table
    _note(changes, f"joined {table} on {alias}.{col} = {table}.{col}")
    return True


def _fix_select(select: exp.Select, schema: dict[str, dict[str, str]], changes: list[str]) -> None:
    sources = read_tables(select)
    if not sources or any(src not in schema for src in sources.values()):
        return
    outputs = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}  # ORDER BY total_weight
    spelled = {t.alias_or_name.lower(): t.alias_or_name for t in select.find_all(exp.Table)}  # "T2" as written
    for column in list(select.find_all(exp.Column)):
        if column.find_ancestor(exp.Select) is not select:
            continue
        name, qualifier = column.name.lower(), column.table.lower()
        if qualifier:
            if qualifier in sources and name in schema[sources[qualifier]]:
                continue
            owners = [a for a, src in sources.items() if name in schema[src]]
            if len(owners) == 1 and not _same_both_sides(column, owners[0]):
                was = column.sql(dialect="duckdb")
                column.set("table", exp.to_identifier(spelled.get(owners[0], owners[0])))
                _note(changes, f"{was} -> {column.sql(dialect='duckdb')} ({sources[owners[0]]} has {column.name})")
            elif not owners and qualifier not in sources and name in schema.get(qualifier, {}):
                _join(select, qualifier, sources, schema, changes)
        elif name not in outputs and not any(name in schema[src] for src in sources.values()):
            owners = [t for t, cols in schema.items() if name in cols and t not in sources.values()]
            if len(owners) == 1 and _join(select, owners[0], sources, schema, changes):
                column.set("table", exp.to_identifier(owners[0]))


def _same_both_sides(column: exp.Column, alias: str) -> bool:
    """Whether moving ``column`` to ``alias`` would compare a column with itself (``T2.k = T2.k`` in a join)."""
    parent = column.parent
    if not isinstance(parent, exp.EQ):
        return False
    other = parent.right if parent.left is column else parent.left
    return isinstance(other, exp.Column) and other.name.lower() == column.name.lower() and other.table.lower() == alias


def _fix_dates(tree: exp.Expression, changes: list[str]) -> None:
    for op in list(tree.find_all(exp.Sub, exp.Add)):
        if not any(isinstance(side, exp.Interval) for side in (op.left, op.right)):
            continue
        for side in (op.left, op.right):
            if isinstance(side, exp.Literal) and side.is_string and DATE_TEXT.fullmatch(side.this):
                side.replace(exp.cast(exp.Literal.string(side.this), "DATE"))
                _note(changes, f"'{side.this}' -> DATE '{side.this}' (a date in date arithmetic)")


def _fix_like(select: exp.Select, schema: dict[str, dict[str, str]], changes: list[str]) -> None:
    sources = read_tables(select)
    for like in list(select.find_all(exp.Like, exp.ILike)):
        column = like.this
        if not isinstance(column, exp.Column) or like.find_ancestor(exp.Select) is not select:
            continue
        tables = [sources[column.table.lower()]] if column.table.lower() in sources else list(sources.values())
        kinds = {schema.get(t, {}).get(column.name.lower(), "") for t in tables} - {""}
        if len(kinds) == 1 and any(k in kinds.pop() for k in ("DATE", "TIME")):
            column.replace(exp.cast(column.copy(), "VARCHAR"))
            _note(changes, f"{column.sql()} LIKE ... -> CAST({column.sql()} AS VARCHAR) LIKE ... (a date read as text)")


def _note(changes: list[str], change: str) -> None:
    if change not in changes:  # T1.region in SELECT and in GROUP BY: one fix
        changes.append(change)
