"""Names for ids: a query result that shows records of another table by their key ("C02") shows their names instead.

Asked "Which carriers ...?", a small SQL writer often groups by ``carrier_id`` and stops there: its rows are right,
but "C02" answers nobody, and the answer built on it repeats the code. Where a result has a column named exactly
as the key of a table that also has a name column (``carriers.carrier_id`` and ``carriers.name``), and the question
neither asks for ids nor gives one of that table's, :func:`with_names` wraps the writer's statement so that the
column holds each record's name (``carrier_name``), its rows, their order and the other columns unchanged:

    SELECT t1.name AS carrier_name, q.* EXCLUDE (carrier_id, __row)
    FROM (SELECT *, row_number() OVER () AS __row FROM (<the writer's statement>) AS q0) AS q
    LEFT JOIN carriers AS t1 ON t1.carrier_id = q.carrier_id ORDER BY q.__row

No model call. The wrapped statement passes the SQL guard like any other and runs in place of the first; when it
fails, the first result stands (rag.agent.dataroute). ``sql_names`` turns it on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

NAMES = 5000  # a table is named this way when it has at most this many rows (its ids are read to match questions)
ASKS_FOR_IDS = re.compile(r"\b(ids?|codes?|identifiers?)\b", re.I)
_WORD = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Labelled:
    """A table whose rows people name: its key column, the column of names, and the ids it holds."""

    table: str
    key: str
    label: str
    ids: frozenset[str]


def labelled_keys(record: dict[str, Any], warehouse: Any) -> dict[str, Labelled]:
    """``{key column: Labelled}`` for each table of ``record`` with a unique ``*_id`` (or ``id``) key and a unique
    text column of names (``name``, ``title``), at most NAMES rows; keys only another table's column could hold."""
    found: dict[str, Labelled] = {}
    for entry in record.get("tables") or []:
        table, rows = entry["name"], int(entry.get("rows") or 0)
        if not 0 < rows <= NAMES:
            continue
        key = label = None
        for col in entry.get("columns", []):
            name, kind = col["name"], str(col.get("type") or "").upper()
            lower = name.lower()
            if key is None and (lower == "id" or lower.endswith("_id")) and _unique(warehouse, table, name, rows):
                key = name
            elif label is None and kind == "VARCHAR" and ("name" in lower or "title" in lower) \
                    and _unique(warehouse, table, name, rows):
                label = name
        if key and label and key.lower() != "id":
            ids = warehouse.run(f"SELECT DISTINCT CAST({_q(key)} AS VARCHAR) FROM {_q(table)}", max_rows=NAMES).rows
            found[key.lower()] = Labelled(table, key, label, frozenset(str(r[0]).lower() for r in ids))
    return found


def with_names(sql: str, columns: list[str], question: str, keys: dict[str, Labelled]) -> tuple[str, list[str]] | None:
    """(the wrapped statement, one line per column named) for a result of ``columns`` from ``sql``, or None when no
    column is to be named (see the module's docstring)."""
    if not keys or ASKS_FOR_IDS.search(question):
        return None
    words = {w.lower() for w in _WORD.findall(question)}
    lowered = [c.lower() for c in columns]
    chosen = [keys[c] for c in lowered if c in keys and lowered.count(c) == 1
              and keys[c].label.lower() not in lowered and not (keys[c].ids & words)]
    if not chosen or "__row" in lowered:
        return None
    names, joins, changes = [], [], []
    for n, named in enumerate(chosen, 1):
        alias, column = f"t{n}", f"{named.key[:-3] if named.key.lower().endswith('_id') else named.table}_{named.label}"
        names.append(f"{alias}.{_q(named.label)} AS {_q(column)}")
        joins.append(f"LEFT JOIN {_q(named.table)} AS {alias} ON {alias}.{_q(named.key)} = q.{_q(named.key)}")
        changes.append(f"{named.key} shown as {named.table}.{named.label} ({column})")
    excluded = ", ".join([*(_q(c.key) for c in chosen), "__row"])
    body = sql.strip().rstrip(";")
    wrapped = (f"SELECT {', '.join(names)}, q.* EXCLUDE ({excluded}) FROM (SELECT *, row_number() OVER () AS __row "
               f"FROM ({body}) AS q0) AS q {' '.join(joins)} ORDER BY q.__row")
    return wrapped, changes


def _unique(warehouse: Any, table: str, column: str, rows: int) -> bool:
    count = warehouse.run(f"SELECT COUNT(DISTINCT {_q(column)}) FROM {_q(table)}").rows[0][0]
    return count == rows


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
