"""What a query asks of the tables that no row can give: a value no row of its column holds, a time of day read from
a date, a period outside the dates a column holds.

Asked for what is finer than, or outside, what the tables record, the SQL writer still writes a query that runs.
"Which rejected claims were turned down because of insufficient packaging?" keeps the rows where ``reason =
'insufficient packaging'``, a value the column never holds, and the answer says "none". "At what time of day was
S00500 collected?" reads ``EXTRACT(HOUR FROM shipped_on)`` from a DATE column, and the answer says "0 o'clock".
Neither result answers the question, because the tables do not record what it asks. :meth:`Unrecorded.find` names
both, and the critic's ``absent`` check flags the answer (rag.agent.critique):

- **value**: a condition ``column = 'x'`` or ``column IN ('x', ...)`` in which no value is one a row of the column
  holds. It applies only to a text column whose distinct values are all known (rag.data.schemalink.column_values:
  at most VALUES_PER_COLUMN of them, read once when the agent starts). A literal longer than VALUE_CHARS is never
  judged, because values that long are not read.
- **time**: the hour, minute or second of a DATE column: ``EXTRACT(HOUR FROM d)``, ``date_part('hour', d)``,
  ``hour(d)``, or ``strftime`` with ``%H``, ``%M``, ``%S``, ``%I`` or ``%p``. A DATE has no time of day, so each of
  these reads 0.

- **period** (:meth:`Unrecorded.outside`): a DATE column compared (``=``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``)
  with a date outside the span its rows hold, or its year (``year(d)``, ``extract(year from d)``, ``date_part('year',
  d)``, ``strftime(d, '%Y')``) or month (``strftime(d, '%Y-%m')``, ``date_trunc('month', d)``) with one outside
  theirs, in a condition not under OR, NOT, CASE, a UNION or an outer join's ON: that condition keeps no row.
  "How many claims came in during January 2025?" keeps ``filed_on BETWEEN '2025-01-01' AND '2025-01-31'`` when
  claims end on 2024-12-31, and the answer says "0". The critic's coverage check cannot see this from the
  question's year alone when another date column (a promised date) runs into that year. Spans are read once when
  the agent starts (rag.data.coverage).

A qualified column is judged against its own table (``shipments.status = 'rejected'``: a claim's status, never a
shipment's); a bare one against every table the query reads that has a column of that name (``status = 'x'``
against claims and shipments when it reads both). A condition on a column whose values are not all known is left
alone.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from rag.data.schemalink import NAMES_FROM, VALUE_CHARS

TIME_PARTS = {"hour", "minute", "second", "hours", "minutes", "seconds"}
TIME_FORMATS = ("%H", "%M", "%S", "%I", "%p", "%T", "%R")  # strftime: hour, minute, second, 12-hour, AM/PM, h:m:s
_ISO_DATE = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?")  # '2025-01-31', '2025-01-31 00:00', '2025-01'
_OPS = {"EQ": "=", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<="}  # sqlglot's comparison nodes, by class name
_FLIPPED = {"=": "=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}  # the same comparison read from its other side


@dataclass
class Unrecorded:
    held: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (table, column) -> every value it holds
    dates: set[tuple[str, str]] = field(default_factory=set)  # (table, column) of the DATE columns
    texts: set[tuple[str, str]] = field(default_factory=set)  # (table, column) of every text column, values known or not
    spans: dict[tuple[str, str], tuple[dt.date, dt.date]] = field(default_factory=dict)  # DATE column -> first, last

    @classmethod
    def from_record(cls, record: dict[str, Any], values: dict[str, list[str]],
                    spans: dict[tuple[str, str], tuple[dt.date, dt.date]] | None = None) -> Unrecorded:
        """From a tables record (rag.data.build_database), its text columns' values, per ``table.column``
        (rag.data.schemalink.column_values: a column is there only when all its values are), and the first and
        last date of its DATE columns, per (table, column) (rag.data.coverage.date_spans; none: no period judged)."""
        held = {}
        for key, found in values.items():
            table, _, column = key.partition(".")
            held[(table.lower(), column.lower())] = set(found)
        kinds = {(t["name"].lower(), c["name"].lower()): str(c.get("type", "")).upper()
                 for t in record.get("tables") or [] for c in t.get("columns", [])}
        return cls(held, {k for k, kind in kinds.items() if kind == "DATE"},
                   {k for k, kind in kinds.items() if "CHAR" in kind or "TEXT" in kind},
                   {(t.lower(), c.lower()): span for (t, c), span in (spans or {}).items()})

    def find(self, sql: str) -> list[str]:
        """What ``sql`` asks that no row can give, one phrase each ("claims.reason is never 'insufficient
        packaging' (its values: damage, delay, loss, shortage)"); [] when nothing, or when it does not parse."""
        from rag.data.coverage import parse_sql, tables_read

        tree = parse_sql(sql)
        if tree is None:
            return []
        read = {t.lower() for t in tables_read(sql)}
        return list(dict.fromkeys([*self._values(tree, read), *self._times(tree, read)]))

    def _values(self, tree: Any, read: set[str]) -> list[str]:
        from sqlglot import exp

        found = []
        for condition in tree.find_all(exp.EQ, exp.In):
            columns = [c for c in (condition.this, condition.expression) if isinstance(c, exp.Column)] \
                if isinstance(condition, exp.EQ) else [condition.this] if isinstance(condition.this, exp.Column) else []
            literals = [v for v in ([condition.left, condition.right] if isinstance(condition, exp.EQ)
                                    else condition.expressions) if isinstance(v, exp.Literal) and v.is_string]
            if len(columns) != 1 or not literals or any(len(v.this) > VALUE_CHARS for v in literals) \
                    or condition.find_ancestor(exp.Or, exp.Not):  # "= 'Damage' OR = 'damage'": the other may hold
                continue
            name, owner = columns[0].name.lower(), _owner(columns[0])
            candidates = [owner] if owner else [t for t in read if (t, name) in self.texts]
            tables = [t for t in candidates if (t, name) in self.held]
            if not tables or len(tables) < len(candidates):
                continue  # no table with all its values known, or one whose values are not
            wanted = [v.this for v in literals]
            if any(value in self.held[(t, name)] for t in tables for value in wanted):
                continue
            known = sorted(set().union(*(self.held[(t, name)] for t in tables)))
            shown = f"its values: {', '.join(known)}" if len(known) < NAMES_FROM else f"none of its {len(known)} values"
            said = " or ".join(f"'{v}'" for v in wanted)
            found.append(f"{'/'.join(f'{t}.{name}' for t in sorted(tables))} is never {said} ({shown})")
        return found

    def _times(self, tree: Any, read: set[str]) -> list[str]:
        from sqlglot import exp

        found = []
        for node in tree.find_all(exp.Extract, exp.Hour, exp.Minute, exp.Second, exp.Anonymous, exp.TimeToStr):
            args = [a for v in node.args.values() for a in (v if isinstance(v, list) else [v])
                    if isinstance(a, exp.Expression)]
            texts = [a.name for a in args if isinstance(a, (exp.Var, exp.Literal))]  # as written: %M is not %m
            parts = TIME_PARTS & {t.lower() for t in texts}
            if isinstance(node, exp.Extract) and not parts:
                continue
            if isinstance(node, exp.Anonymous) and not (node.name.lower() in ("date_part", "datepart") and parts):
                continue
            if isinstance(node, exp.TimeToStr) and not any(f in t for t in texts for f in TIME_FORMATS):
                continue
            for column in (c for a in args for c in ([a] if isinstance(a, exp.Column) else a.find_all(exp.Column))):
                dated = sorted(t for t in read if (t, column.name.lower()) in self.dates)
                if dated:
                    found.append(f"{'/'.join(f'{t}.{column.name.lower()}' for t in dated)} holds dates, not times "
                                 "of day")
        return found

    def outside(self, sql: str) -> list[str]:
        """The date conditions of ``sql`` that keep no row because they ask for a period outside the dates the
        column holds, one phrase each ("claims.filed_on runs from 2024-01-12 to 2024-12-31: filed_on BETWEEN
        '2025-01-01' AND '2025-01-31' keeps no row"); [] when none, or when it does not parse."""
        from sqlglot import exp

        from rag.data.coverage import parse_sql, tables_read

        tree = parse_sql(sql)
        if tree is None or not self.spans:
            return []
        read = {t.lower() for t in tables_read(sql)}
        found = []
        for node in tree.find_all(exp.EQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between):
            if node.find_ancestor(exp.Or, exp.Not, exp.Case, exp.If, exp.Union) or _outer_join(node):
                continue  # another branch (of an OR, a UNION) may keep rows; a CASE or an outer join's ON keeps every row
            if isinstance(node, exp.Between):
                sides = [(node.this, ">=", node.args.get("low")), (node.this, "<=", node.args.get("high"))]
            else:
                op = _OPS[type(node).__name__]
                sides = [(node.left, op, node.right), (node.right, _FLIPPED[op], node.left)]
            for side, op, other in sides:
                dated = _dated(side)
                if dated is None or (value := _point(other, dated[1])) is None:
                    continue
                column, unit = dated
                name, owner = column.name.lower(), _owner(column)
                tables = [owner] if owner else [t for t in read if (t, name) in self.spans]
                if not tables or any((t, name) not in self.spans for t in tables):
                    continue
                if all(_empty(op, value, *(_on(d, unit) for d in self.spans[(t, name)])) for t in tables):
                    runs = "; ".join(f"{t}.{name} runs from {a} to {b}" for t in sorted(tables)
                                     for a, b in [self.spans[(t, name)]])
                    found.append(f"{runs}: {node.sql('duckdb')} keeps no row")
                    break
        return list(dict.fromkeys(found))


def _outer_join(node: Any) -> bool:
    """Whether ``node`` is in the ON of a LEFT, RIGHT or FULL join, which keeps the other side's rows."""
    from sqlglot import exp

    join = node.find_ancestor(exp.Join)
    if join is None or not join.side or join.args.get("on") is None:
        return False
    up = node
    while up is not None and up is not join:
        if up is join.args["on"]:
            return True
        up = up.parent
    return False


def _dated(node: Any) -> tuple[Any, str] | None:
    """(the column, "day", "month" or "year") when ``node`` is a column, its year or its month; else None."""
    from sqlglot import exp

    if isinstance(node, exp.Cast) and node.to.this in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP):
        node = node.this
    if isinstance(node, exp.Column):
        return node, "day"
    inner = None
    if isinstance(node, exp.Year):
        inner, unit = node.this, "year"
    elif isinstance(node, exp.Extract) and node.this.name.lower() == "year":
        inner, unit = node.expression, "year"
    elif isinstance(node, exp.Anonymous) and node.name.lower() in ("date_part", "datepart") and len(node.expressions) == 2 \
            and node.expressions[0].name.lower() == "year":
        inner, unit = node.expressions[1], "year"
    elif isinstance(node, exp.TimeToStr) and node.args.get("format") is not None:
        unit = {"%Y": "year", "%Y-%m": "month"}.get(node.args["format"].name, "")
        inner = node.this if unit else None
    elif isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)) and (node.args.get("unit") is not None):
        unit = {"year": "year", "month": "month"}.get(node.args["unit"].name.lower(), "")
        inner = node.this if unit else None
    return (inner, unit) if isinstance(inner, exp.Column) else None


def _point(node: Any, unit: str) -> int | None:
    """The literal ``node`` as an ordinal on ``unit`` (a day, a month, a year), or None when it is no literal date
    or year (a column, an expression, a text that is not a date)."""
    from sqlglot import exp

    if isinstance(node, exp.Cast):
        node = node.this
    if not isinstance(node, exp.Literal):
        return None
    text = node.this.strip()
    if unit == "year" and text.isdigit() and len(text) == 4:
        return int(text)  # 2025 or '2025'
    m = _ISO_DATE.match(text) if node.is_string else None
    if m is None:
        return None
    year, month, day = int(m.group(1)), int(m.group(2)), m.group(3)
    try:
        date = dt.date(year, month, int(day or 1))
    except ValueError:
        return None
    if unit == "day" and day is None:
        return None  # '2025-01' against a date: DuckDB would not read it as one
    return _on(date, unit)


def _on(date: dt.date, unit: str) -> int:
    return date.year if unit == "year" else date.year * 12 + date.month - 1 if unit == "month" else date.toordinal()


def _empty(op: str, value: int, first: int, last: int) -> bool:
    """Whether ``x op value`` holds for no x in [first, last]."""
    return {"=": value < first or value > last, ">": last <= value, ">=": last < value,
            "<": first >= value, "<=": first > value}[op]


def _owner(column: Any) -> str | None:
    """The table a qualified column belongs to (``s.status``: shipments, by the aliases of its SELECT); None when
    it is bare or its qualifier names no table that SELECT reads."""
    from sqlglot import exp

    from rag.data.sqlrepair import read_tables

    select = column.find_ancestor(exp.Select)
    return read_tables(select).get(column.table.lower()) if column.table and select is not None else None
