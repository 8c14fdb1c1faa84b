"""Schema repairs of a model's SQL: the mistakes a small model makes about *where* a column is, fixed by the schema.

A 1.5B model writes the right query with the wrong table qualifier (``T1.region`` where ``region`` is in the table
aliased ``T2``), names a table it never joined (``amount_eur > 20 * shipments.weight_kg`` with only ``claims`` in
FROM), or subtracts an interval from a date written as a string (``'2024-12-31' - INTERVAL 45 DAY``). DuckDB
rejects each with a Binder Error, and given the error the same model rewrites the same statement
(benchmarks/results/data_route_corrections.md). :func:`repair_sql` fixes these from the schema alone, on sqlglot's
AST, before the model's one correction:

- a qualified column its table lacks moves to the one table of the query that has it;
- a table named by a column but absent from FROM is joined along the shortest chain of key joins
  (rag.data.joinpaths: ``claims.shipment_id = shipments.shipment_id``), any table between joined too;
- a column no table of the query has (``customer_id`` with only ``claims`` in FROM), written bare or with a table
  that lacks it (``c.claim_id``, c being ``customers``), comes from the nearest table that has it, joined the same
  way; when two such tables are equally near, nothing is guessed;
- a JOIN whose ON is one equality of a column one side lacks (``customers c JOIN claims cl ON c.customer_id =
  cl.customer_id``) goes through the tables between instead;
- after any join the repair adds, a bare column that one of the query's own tables had is qualified with it, so
  the new table makes nothing ambiguous (``status`` in claims and in shipments);
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

from rag.data.joinpaths import JoinPaths

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
    paths = JoinPaths.from_columns({table: list(columns) for table, columns in schema.items()})
    for select in list(tree.find_all(exp.Select)):
        _fix_select(select, schema, paths, changes)
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


def _join(select: exp.Select, table: str, sources: dict[str, str], paths: JoinPaths, changes: list[str]) -> bool:
    """Join ``table`` to the query along the shortest chain of key joins from a table it reads."""
    hops = paths.path(sources.values(), table)
    if not hops:
        return False
    spelled = _spelled(select)
    for a, b, column in hops:
        alias = spelled.get(found := _alias_of(a, sources), found)
        select.join(exp.Table(this=exp.to_identifier(b)), on=f"{alias}.{column} = {b}.{column}", copy=False)
        sources[b] = b
        _note(changes, f"joined {b} on {alias}.{column} = {b}.{column}")
    return True


def _nearest(name: str, sources: dict[str, str], schema: dict[str, dict[str, str]], paths: JoinPaths) -> str | None:
    """The table holding column ``name`` that is fewest joins from the query's tables; None when none is, or two
    are equally near."""
    near = sorted((len(hops), table) for table, columns in schema.items()
                  if name in columns and table not in sources.values()
                  and (hops := paths.path(sources.values(), table)) is not None)
    return near[0][1] if near and (len(near) == 1 or near[0][0] < near[1][0]) else None


def _fix_select(select: exp.Select, schema: dict[str, dict[str, str]], paths: JoinPaths, changes: list[str]) -> None:
    sources = read_tables(select)
    if not sources or any(src not in schema for src in sources.values()):
        return
    own = dict(sources)  # the query's own tables, before any join of the repair's
    _fix_joins(select, sources, schema, paths, changes)
    outputs = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}  # ORDER BY total_weight
    spelled = _spelled(select)
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
                _join(select, qualifier, sources, paths, changes)
            elif not owners and qualifier in sources and (table := _nearest(name, sources, schema, paths)) \
                    and _join(select, table, sources, paths, changes):
                was = column.sql(dialect="duckdb")
                column.set("table", exp.to_identifier(table))
                _note(changes, f"{was} -> {column.sql(dialect='duckdb')} ({table} has {column.name})")
        elif name not in outputs and not any(name in schema[src] for src in sources.values()):
            if (table := _nearest(name, sources, schema, paths)) and _join(select, table, sources, paths, changes):
                column.set("table", exp.to_identifier(table))
    if len(sources) > len(own):
        _qualify(select, own, schema, outputs, spelled, changes)


def _fix_joins(select: exp.Select, sources: dict[str, str], schema: dict[str, dict[str, str]], paths: JoinPaths,
               changes: list[str]) -> None:
    """A JOIN on one equality of a column one side's table lacks goes through the tables between (module doc)."""
    joins = list(select.args.get("joins") or [])
    for join in list(joins):
        on, table = join.args.get("on"), join.this
        if not (isinstance(on, exp.EQ) and isinstance(on.left, exp.Column) and isinstance(on.right, exp.Column)
                and isinstance(table, exp.Table)):
            continue
        alias = table.alias_or_name.lower()
        sides = [(c.table.lower(), c.name.lower()) for c in (on.left, on.right)]
        if alias not in {q for q, _ in sides} or any(q not in sources for q, _ in sides) \
                or all(name in schema[sources[q]] for q, name in sides):
            continue
        spelled = _spelled(select)
        before = {spelled.get(a, a): src for a, src in sources.items()
                  if a != alias and _read_before(a, joins[:joins.index(join)], select)}
        hops = paths.path(before.values(), sources[alias])
        if not hops:
            continue
        added = []
        for a, b, column in hops[:-1]:
            here = _alias_of(a, before)
            before[b] = b
            added.append(b)
            joins.insert(joins.index(join), exp.Join(this=exp.Table(this=exp.to_identifier(b)),
                                                     on=sqlglot.condition(f"{here}.{column} = {b}.{column}"),
                                                     side=join.args.get("side")))
            sources[b] = b
        a, _, column = hops[-1]
        here = _alias_of(a, before)
        was = on.sql(dialect="duckdb")
        join.set("on", sqlglot.condition(f"{here}.{column} = {table.alias_or_name}.{column}"))
        through = f"through {', '.join(added)}: " if added else ""
        _note(changes, f"JOIN {sources[alias]} ON {was} -> {through}ON {join.args['on'].sql(dialect='duckdb')}")
    select.set("joins", joins)


def _spelled(select: exp.Select) -> dict[str, str]:
    """``{alias or name, lower case: as written}`` of the tables in ``select`` ("t2": "T2")."""
    return {t.alias_or_name.lower(): t.alias_or_name for t in select.find_all(exp.Table)}


def _alias_of(table: str, aliases: dict[str, str]) -> str:
    """The first alias in ``aliases`` (alias -> table) that reads ``table``."""
    return next(alias for alias, src in aliases.items() if src == table)


def _read_before(alias: str, joins: list[exp.Join], select: exp.Select) -> bool:
    """Whether ``alias`` is the FROM table or one of ``joins``."""
    tables = [node.this for node in [select.args.get("from_") or select.args.get("from"), *joins] if node is not None]
    return any(isinstance(t, exp.Table) and t.alias_or_name.lower() == alias for t in tables)


def _qualify(select: exp.Select, own: dict[str, str], schema: dict[str, dict[str, str]], outputs: set[str],
             spelled: dict[str, str], changes: list[str]) -> None:
    """A bare column one of the query's own tables had, qualified with it: a table the repair joined may have a
    column of the same name."""
    for column in list(select.find_all(exp.Column)):
        name = column.name.lower()
        if column.table or name in outputs or column.find_ancestor(exp.Select) is not select:
            continue
        owners = [alias for alias, src in own.items() if name in schema[src]]
        if len(owners) == 1:
            column.set("table", exp.to_identifier(spelled.get(owners[0], owners[0])))
            _note(changes, f"{column.name} -> {column.sql(dialect='duckdb')} (kept to {own[owners[0]]} after the join)")


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
