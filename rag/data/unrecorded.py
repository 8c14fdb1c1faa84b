"""What a query asks of the tables that no row can give: a value no row of its column holds, a time of day read from
a date.

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

A qualified column is judged against its own table (``shipments.status = 'rejected'``: a claim's status, never a
shipment's); a bare one against every table the query reads that has a column of that name (``status = 'x'``
against claims and shipments when it reads both). A condition on a column whose values are not all known is left
alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rag.data.schemalink import NAMES_FROM, VALUE_CHARS

TIME_PARTS = {"hour", "minute", "second", "hours", "minutes", "seconds"}
TIME_FORMATS = ("%H", "%M", "%S", "%I", "%p", "%T", "%R")  # strftime: hour, minute, second, 12-hour, AM/PM, h:m:s


@dataclass
class Unrecorded:
    held: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (table, column) -> every value it holds
    dates: set[tuple[str, str]] = field(default_factory=set)  # (table, column) of the DATE columns
    texts: set[tuple[str, str]] = field(default_factory=set)  # (table, column) of every text column, values known or not

    @classmethod
    def from_record(cls, record: dict[str, Any], values: dict[str, list[str]]) -> Unrecorded:
        """From a tables record (rag.data.build_database) and its text columns' values, per ``table.column``
        (rag.data.schemalink.column_values: a column is there only when all its values are)."""
        held = {}
        for key, found in values.items():
            table, _, column = key.partition(".")
            held[(table.lower(), column.lower())] = set(found)
        kinds = {(t["name"].lower(), c["name"].lower()): str(c.get("type", "")).upper()
                 for t in record.get("tables") or [] for c in t.get("columns", [])}
        return cls(held, {k for k, kind in kinds.items() if kind == "DATE"},
                   {k for k, kind in kinds.items() if "CHAR" in kind or "TEXT" in kind})

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


def _owner(column: Any) -> str | None:
    """The table a qualified column belongs to (``s.status``: shipments, by the aliases of its SELECT); None when
    it is bare or its qualifier names no table that SELECT reads."""
    from sqlglot import exp

    from rag.data.sqlrepair import read_tables

    select = column.find_ancestor(exp.Select)
    return read_tables(select).get(column.table.lower()) if column.table and select is not None else None
