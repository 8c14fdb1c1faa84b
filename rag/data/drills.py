"""Worked examples written from the tables themselves: questions with the statement that answers them, no labels.

A 1.5B SQL writer shown the labelled queries nearest a question writes right statements far more often
(``sql_examples``, rag.data.labelled), but a new user has no labels. The mistakes it makes without them are
mostly idioms, not domain knowledge: it filters a month as one day, adds ``LIMIT 1`` to a breakdown, guesses a
customer's id instead of joining on the name it was given, joins a table whose columns it never reads, and
subtracts dates the wrong way. :func:`drills` writes examples of exactly those idioms for the user's own tables,
from what the index knows of them (each table's columns and types, which column is a key and which refers to it,
the values a column takes), by fixed templates:

- counts, breakdowns and shares by a column with few values (``status``: "How many claims have status open?");
- totals and averages of a number, rounded, overall and per group;
- a true/false column as the condition itself;
- a month, a quarter and a per-month breakdown of a date column, written as ranges;
- days between two dates of a row (the later minus the earlier);
- a record looked up by its key, the names of the records it refers to, its dates moved by a number of days;
- rows of another table counted for a record named by its name, joined on the key (never its id guessed), one hop
  or two;
- the top few by a count, with the LIMIT the question asks for and no other.

:meth:`Drills.linked` writes the last two kinds again for the records a question names (a customer by its name, a
shipment by its id), so the nearest example is about that very record.

Each statement runs through the guard on the real tables and is kept only when it returns rows, so every example
is true of the data; every ``ORDER BY`` ends on the names it ranks, so tied counts return the same rows each time. Nothing is learned and no model is called; the examples are shown as labelled ones are, the
``k`` nearest to each question (``sql_drills``). Results: benchmarks/results/sql_drills.md.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from rag.errors import DataError

FEW = 20  # a column with at most this many distinct values is a category (asked about by value)
LIST_ROWS = 15  # a list is drilled only when the rows it returns are at most this many
NAMES = 5000  # a label column is matched against questions when its table has at most this many rows
LINKED = 8  # drills written for the records one question names, at most
ID_TOKEN = re.compile(r"\b[A-Za-z]{0,6}-?\d{2,}\b")  # what a record's id looks like in a question: S00041, CL0135
UNIT_WORDS = {"eur", "usd", "gbp", "kg", "km", "g", "lb", "pct", "id", "on", "at", "date", "ts"}
_NUMBERS = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
            "FLOAT", "DOUBLE", "REAL")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


@dataclass
class Table:
    """What the templates need to know of one table."""

    name: str
    rows: int
    key: str | None = None  # a column unique per row whose name ends in _id (or is id)
    label: str | None = None  # a unique text column people name a row by ("name", "title")
    refs: dict[str, str] = field(default_factory=dict)  # column -> the table whose key it holds
    categories: dict[str, list[tuple[Any, int]]] = field(default_factory=dict)  # column -> (value, rows), most first
    flags: list[str] = field(default_factory=list)
    numbers: list[str] = field(default_factory=list)
    dates: list[str] = field(default_factory=list)


class Drills:
    """The user's tables as the templates read them. ``items``: the fixed drills, written once; ``linked(question)``:
    drills written for the records the question names (a customer by its name, a shipment by its id), so the
    nearest example joins on that very name instead of showing a join on another."""

    def __init__(self, record: dict[str, Any], warehouse: Any, *, per_table: int = 60):
        self.warehouse = warehouse
        self.tables = {t.name: t for t in (_read(entry, warehouse) for entry in record.get("tables") or [])}
        for table in self.tables.values():
            table.refs = {c: other.name for other in self.tables.values() if other is not table and other.key
                          for c in _columns(record, table.name) if c == other.key and c != table.key}
        self.names = {t.name: {str(v).lower(): v for (v,) in warehouse.run(
            f"SELECT DISTINCT {_q(t.label)} FROM {_q(t.name)} WHERE {_q(t.label)} IS NOT NULL", max_rows=NAMES).rows}
            for t in self.tables.values() if t.label and t.rows <= NAMES}
        self.items: list[dict[str, Any]] = []
        seen: set[str] = set()
        for table in self.tables.values():
            self.items += self._checked(_templates(table, self.tables, warehouse), f"drill-{table.name}", seen,
                                        per_table)

    def linked(self, question: str) -> list[dict[str, Any]]:
        """Drills for the records ``question`` names, checked on the tables like the fixed ones."""
        low, pairs = question.lower(), []
        for name, values in self.names.items():
            for key, value in values.items():
                if re.search(rf"(?<!\w){re.escape(key)}(?!\w)", low):
                    pairs += _named_templates(self.tables[name], value, self.tables)
        for token in dict.fromkeys(ID_TOKEN.findall(question)):
            for table in self.tables.values():
                if table.key and self.warehouse.run(f"SELECT COUNT(*) FROM {_q(table.name)} WHERE {_q(table.key)} = "
                                                    f"{_lit(token)}", max_rows=1).rows[0][0]:
                    pairs += _keyed_templates(table, token, self.tables)
        return self._checked(pairs, "linked", set(), LINKED)

    def _checked(self, pairs: list[tuple[str, str]], prefix: str, seen: set[str], most: int) -> list[dict[str, Any]]:
        """The pairs whose statement runs and returns rows that are not all zeros or empty, up to ``most``."""
        items = []
        for question, sql in pairs:
            if len(items) >= most or question.lower() in seen:
                continue
            try:
                result = self.warehouse.run(sql, time_limit_s=5.0, max_rows=LIST_ROWS)
            except DataError:
                continue
            if not result.rows or result.truncated or all(v in (None, 0) for v in result.rows[0]):
                continue
            seen.add(question.lower())
            items.append({"id": f"{prefix}-{len(items) + 1:02d}", "question": question, "gold_sql": sql,
                          "gold_result": result.to_dict()["rows"]})
        return items


def drills(record: dict[str, Any], warehouse: Any, *, per_table: int = 60) -> list[dict[str, Any]]:
    """The fixed worked examples for the tables of ``record`` (the index's tables record), each ``{"id",
    "question", "gold_sql", "gold_result"}``, in a fixed order; every statement ran on ``warehouse``."""
    return Drills(record, warehouse, per_table=per_table).items


# ---------------------------------------------------------------------- reading the tables
def _columns(record: dict[str, Any], name: str) -> list[str]:
    return [c["name"] for t in record.get("tables") or [] if t["name"] == name for c in t.get("columns", [])]


def _read(entry: dict[str, Any], warehouse: Any) -> Table:
    name, rows = entry["name"], int(entry.get("rows") or 0)
    table = Table(name=name, rows=rows)
    for col in entry.get("columns", []):
        col_name, kind = col["name"], str(col.get("type") or "").upper()
        if not (kind in ("VARCHAR", "BOOLEAN") or kind.startswith(("DATE", "TIMESTAMP", "DECIMAL", *_NUMBERS))):
            continue  # lists, structs, blobs: no template asks about them
        distinct = _scalar(warehouse, f"SELECT COUNT(DISTINCT {_q(col_name)}) FROM {_q(name)}")
        unique = rows > 0 and distinct == rows
        if unique and table.key is None and (col_name.lower() == "id" or col_name.lower().endswith("_id")):
            table.key = col_name
        elif unique and table.label is None and kind == "VARCHAR" and any(
                w in col_name.lower() for w in ("name", "title")):
            table.label = col_name
        elif kind == "BOOLEAN":
            table.flags.append(col_name)
        elif kind.startswith(("DATE", "TIMESTAMP")):
            table.dates.append(col_name)
        elif 2 <= distinct <= FEW and (kind == "VARCHAR" or kind.startswith(_NUMBERS)) \
                and not col_name.lower().endswith("_id"):
            counts = warehouse.run(f"SELECT {_q(col_name)}, COUNT(*) AS n FROM {_q(name)} WHERE {_q(col_name)} IS "
                                   f"NOT NULL GROUP BY 1 ORDER BY n DESC, 1", max_rows=FEW).rows
            table.categories[col_name] = [(v, int(n)) for v, n in counts]
        elif kind.startswith(_NUMBERS) or kind.startswith("DECIMAL"):
            if not col_name.lower().endswith("_id"):
                table.numbers.append(col_name)
    return table


def _scalar(warehouse: Any, sql: str) -> Any:
    """The first cell of ``sql``'s result; None when it has no rows."""
    rows = warehouse.run(sql, max_rows=1).rows
    return rows[0][0] if rows else None


# ---------------------------------------------------------------------- the templates
def _templates(t: Table, tables: dict[str, Table], warehouse: Any) -> list[tuple[str, str]]:
    """(question, statement) pairs for table ``t``, most basic first."""
    n, one, q = _plural(t.name), _singular(t.name), _q(t.name)
    out: list[tuple[str, str]] = []
    for col, values in t.categories.items():
        top, c = values[0][0], _words(col)
        out.append((f"How many {n} have {c} {top}?", f"SELECT COUNT(*) AS {_alias(n)} FROM {q} WHERE {_q(col)} = {_lit(top)}"))
        out.append((f"Break down the {n} by {c}.", f"SELECT {_q(col)}, COUNT(*) AS {_alias(n)} FROM {q} GROUP BY "
                    f"{_q(col)} ORDER BY {_alias(n)} DESC, {_q(col)}"))
        out.append((f"What percentage of {n} have {c} {top}? One decimal.",
                    f"SELECT ROUND(100.0 * COUNT(*) FILTER (WHERE {_q(col)} = {_lit(top)}) / COUNT(*), 1) AS pct FROM {q}"))
        rare, count = values[-1]
        if t.key and count <= LIST_ROWS and t.numbers:
            m = t.numbers[0]
            out.append((f"List the {n} with {c} {rare} and their {_words(m)}, largest first.",
                        f"SELECT {_q(t.key)}, {_q(m)} FROM {q} WHERE {_q(col)} = {_lit(rare)} ORDER BY {_q(m)} DESC, {_q(t.key)}"))
    for flag in t.flags:
        out.append((f"How many {n} are {_words(flag)}?", f"SELECT COUNT(*) AS {_alias(n)} FROM {q} WHERE {_q(flag)}"))
        if t.numbers and (t.label or t.key):
            m = t.numbers[0]
            out.append((f"List the {n} that are {_words(flag)}, with their {_words(m)}, largest first.",
                        f"SELECT {_q(t.label or t.key)}, {_q(m)} FROM {q} WHERE {_q(flag)} ORDER BY {_q(m)} DESC, "
                        f"{_q(t.label or t.key)}"))
        if t.categories:
            col, values = next(iter(t.categories.items()))
            out.append((f"How many {n} with {_words(col)} {values[0][0]} are {_words(flag)}?",
                        f"SELECT COUNT(*) AS {_alias(n)} FROM {q} WHERE {_q(col)} = {_lit(values[0][0])} AND {_q(flag)}"))
    for m in t.numbers:
        w = _words(m)
        out.append((f"What is the {w if w.startswith('total') else 'total ' + w} of all {n}? Round to two decimals.",
                    f"SELECT ROUND(SUM({_q(m)}), 2) AS total_{_alias(w)} FROM {q}"))
        for col, values in list(t.categories.items())[:2]:
            out.append((f"What is the average {w} of {n} with {_words(col)} {values[0][0]}? Two decimals.",
                        f"SELECT ROUND(AVG({_q(m)}), 2) AS avg_{_alias(w)} FROM {q} WHERE {_q(col)} = {_lit(values[0][0])}"))
            out.append((f"Average {w} per {_words(col)}, highest first.",
                        f"SELECT {_q(col)}, ROUND(AVG({_q(m)}), 2) AS avg_{_alias(w)} FROM {q} GROUP BY {_q(col)} "
                        f"ORDER BY avg_{_alias(w)} DESC, {_q(col)}"))
        if t.key:
            out.append((f"Which {one} has the largest {w}, and how much?",
                        f"SELECT {_q(t.label or t.key)}, {_q(m)} FROM {q} ORDER BY {_q(m)} DESC, {_q(t.label or t.key)} "
                        "LIMIT 1"))
    out += _join_templates(t, tables, warehouse)
    out += _date_templates(t, warehouse)
    if t.key:
        sample = _scalar(warehouse, f"SELECT {_q(t.key)} FROM {q} ORDER BY {_q(t.key)} LIMIT 1 OFFSET {t.rows // 2}")
        if sample is not None:
            out += _keyed_templates(t, sample, tables)
    return out


def _date_templates(t: Table, warehouse: Any) -> list[tuple[str, str]]:
    n, q, out = _plural(t.name), _q(t.name), []
    for d in t.dates:
        busiest = _scalar(warehouse, f"SELECT strftime({_q(d)}, '%Y-%m') AS month FROM {q} WHERE {_q(d)} IS NOT NULL "
                                     "GROUP BY month ORDER BY COUNT(*) DESC, month LIMIT 1")
        if busiest is None:
            continue
        year, month = map(int, busiest.split("-"))
        start, end = dt.date(year, month, 1), dt.date(year + month // 12, month % 12 + 1, 1)
        verb = _when(d, n)
        out.append((f"How many {verb} in {_MONTHS[month - 1]} {year}?",
                    f"SELECT COUNT(*) AS {_alias(n)} FROM {q} WHERE {_q(d)} >= DATE '{start}' AND {_q(d)} < DATE '{end}'"))
        quarter = (month - 1) // 3
        qs, qe = dt.date(year, 3 * quarter + 1, 1), dt.date(year + (quarter == 3), (3 * quarter + 3) % 12 + 1, 1)
        out.append((f"How many {verb} in Q{quarter + 1} {year}?",
                    f"SELECT COUNT(*) AS {_alias(n)} FROM {q} WHERE {_q(d)} >= DATE '{qs}' AND {_q(d)} < DATE '{qe}'"))
        out.append((f"Per month, how many {verb}?",
                    f"SELECT strftime({_q(d)}, '%Y-%m') AS month, COUNT(*) AS {_alias(n)} FROM {q} WHERE {_q(d)} IS "
                    f"NOT NULL GROUP BY month ORDER BY month"))
    for i, first in enumerate(t.dates):
        for later in t.dates[i + 1:]:
            gap = _scalar(warehouse, f"SELECT AVG({_q(later)} - {_q(first)}) FROM {q}")
            if gap is None or gap == 0:
                continue
            a, b = (first, later) if gap > 0 else (later, first)
            days = max(1, int(round(abs(float(gap)))))
            out.append((f"On average, how many days are there from {_words(a)} to {_words(b)}? Two decimals.",
                        f"SELECT ROUND(AVG({_q(b)} - {_q(a)}), 2) AS avg_days FROM {q} WHERE {_q(b)} IS NOT NULL"))
            out.append((f"How many {n} {_than(b, a, f'more than {days} days after')}?",
                        f"SELECT COUNT(*) AS {_alias(n)} FROM {q} WHERE {_q(b)} - {_q(a)} > {days}"))
            out.append((f"How many {n} {_than(a, b, 'later than')}?",
                        f"SELECT COUNT(*) AS {_alias(n)} FROM {q} WHERE {_q(a)} > {_q(b)}"))
    return out


def _join_templates(t: Table, tables: dict[str, Table], warehouse: Any) -> list[tuple[str, str]]:
    """Rows of ``t`` counted or summed for a record of a table it refers to, named by that record's label."""
    n, q, out = _plural(t.name), _q(t.name), []
    for col, parent_name in t.refs.items():
        parent = tables[parent_name]
        pq, one = _q(parent.name), _singular(parent.name)
        on = f"{q}.{_q(col)} = {pq}.{_q(col)}"
        if parent.label:
            label = f"{pq}.{_q(parent.label)}"
            top = _scalar(warehouse, f"SELECT {label} FROM {q} JOIN {pq} ON {on} GROUP BY {label} ORDER BY COUNT(*) "
                                     f"DESC, {label} LIMIT 1")
            if top is not None:
                out.append((f"How many {n} are for the {one} {top}?",
                            f"SELECT COUNT(*) AS {_alias(n)} FROM {q} JOIN {pq} ON {on} WHERE {label} = {_lit(top)}"))
                for m in t.numbers[:2]:
                    out.append((f"What is the total {_words(m)} of the {n} of {top}? Round to two decimals.",
                                f"SELECT ROUND(SUM({q}.{_q(m)}), 2) AS total_{_alias(_words(m))} FROM {q} JOIN {pq} ON "
                                f"{on} WHERE {label} = {_lit(top)}"))
            out.append((f"Which {one} has the most {n}, and how many?",
                        f"SELECT {label}, COUNT(*) AS {_alias(n)} FROM {q} JOIN {pq} ON {on} GROUP BY {label} "
                        f"ORDER BY {_alias(n)} DESC, {label} LIMIT 1"))
            out.append((f"Show the top 3 {_plural(parent.name)} by number of {n}, with their counts.",
                        f"SELECT {label}, COUNT(*) AS {_alias(n)} FROM {q} JOIN {pq} ON {on} GROUP BY {label} "
                        f"ORDER BY {_alias(n)} DESC, {label} LIMIT 3"))
        for pcol in list(parent.categories)[:2]:
            out.append((f"Break down the {n} by {one} {_words(pcol)}.",
                        f"SELECT {pq}.{_q(pcol)}, COUNT(*) AS {_alias(n)} FROM {q} JOIN {pq} ON {on} GROUP BY "
                        f"{pq}.{_q(pcol)} ORDER BY {_alias(n)} DESC, {pq}.{_q(pcol)}"))
        for gcol, grand_name in parent.refs.items():  # two hops: claims -> shipments -> customers
            grand = tables[grand_name]
            if not grand.label:
                continue
            gq, gone = _q(grand.name), _singular(grand.name)
            label = f"{gq}.{_q(grand.label)}"
            out.append((f"Which {gone} has the most {n}, and how many?",
                        f"SELECT {label}, COUNT(*) AS {_alias(n)} FROM {q} JOIN {pq} ON {on} JOIN {gq} ON "
                        f"{pq}.{_q(gcol)} = {gq}.{_q(gcol)} GROUP BY {label} ORDER BY {_alias(n)} DESC, {label} "
                        "LIMIT 1"))
    return out


def _named_templates(parent: Table, value: Any, tables: dict[str, Table]) -> list[tuple[str, str]]:
    """Rows of the tables that refer to ``parent``, counted and summed for its record named ``value``, one hop or
    two (the claims of a customer go through its shipments)."""
    pq, one, out = _q(parent.name), _singular(parent.name), []
    label = f"{pq}.{_q(parent.label)}"
    for child in tables.values():
        for col, target in child.refs.items():
            if target != parent.name:
                continue
            cq, n = _q(child.name), _plural(child.name)
            on = f"{cq}.{_q(col)} = {pq}.{_q(col)}"
            out.append((f"How many {n} are for the {one} {value}?",
                        f"SELECT COUNT(*) AS {_alias(n)} FROM {cq} JOIN {pq} ON {on} WHERE {label} = {_lit(value)}"))
            for m in child.numbers[:2]:
                w = _words(m)
                out.append((f"What is the total {w} of the {n} of {value}? Round to two decimals.",
                            f"SELECT ROUND(SUM({cq}.{_q(m)}), 2) AS total_{_alias(w)} FROM {cq} JOIN {pq} ON {on} "
                            f"WHERE {label} = {_lit(value)}"))
            for grand in tables.values():
                for gcol, gtarget in grand.refs.items():
                    if gtarget == child.name:
                        gq, gn = _q(grand.name), _plural(grand.name)
                        out.append((f"How many {gn} are for the {one} {value}?",
                                    f"SELECT COUNT(*) AS {_alias(gn)} FROM {gq} JOIN {cq} ON {gq}.{_q(gcol)} = "
                                    f"{cq}.{_q(gcol)} JOIN {pq} ON {on} WHERE {label} = {_lit(value)}"))
    return out


def _keyed_templates(t: Table, key: str, tables: dict[str, Table]) -> list[tuple[str, str]]:
    """The record of ``t`` whose key is ``key``: its values, the names of the records it refers to, its dates
    moved by a number of days."""
    q, one, out = _q(t.name), _singular(t.name), []
    where = f"{q}.{_q(t.key)} = {_lit(key)}"
    shown = [*t.categories, *t.numbers, *t.dates][:3]
    if shown:
        out.append((f"Show the {_listed([_words(c) for c in shown])} of {one} {key}.",
                    f"SELECT {', '.join(f'{q}.{_q(c)}' for c in shown)} FROM {q} WHERE {where}"))
    for col, target in t.refs.items():
        parent = tables[target]
        pq, on = _q(parent.name), f"{q}.{_q(col)} = {_q(parent.name)}.{_q(col)}"
        if parent.label:
            out.append((f"Which {_singular(parent.name)} is {one} {key} for?",
                        f"SELECT {pq}.{_q(parent.label)} FROM {q} JOIN {pq} ON {on} WHERE {where}"))
        for m in parent.numbers[:1]:
            out.append((f"What is the {_words(m)} of the {_singular(parent.name)} of {one} {key}?",
                        f"SELECT {pq}.{_q(m)} FROM {q} JOIN {pq} ON {on} WHERE {where}"))
    for d in t.dates:
        out.append((f"What date is 30 days after the {_words(d)} date of {one} {key}?",
                    f"SELECT CAST({q}.{_q(d)} + INTERVAL 30 DAY AS DATE) AS day FROM {q} WHERE {where}"))
    return out


# ---------------------------------------------------------------------- words
def _words(column: str) -> str:
    """A column's name as words, without unit and key suffixes: freight_eur -> freight, shipped_on -> shipped."""
    parts = [p for p in column.lower().split("_") if p]
    kept = [p for p in parts if p not in UNIT_WORDS] or parts
    return " ".join(kept)


def _when(column: str, rows: str) -> str:
    """"claims were filed" for filed_on; "shipments with order date" for order_date."""
    low = column.lower()
    if low.endswith(("_on", "_at")):
        return f"{rows} were {_words(column)}"
    return f"{rows} have {_words(column)}"


def _than(x: str, y: str, relation: str) -> str:
    """"were delivered later than they were promised" for delivered_on, promised_on; "have x later than y" else."""
    if all(c.lower().endswith(("_on", "_at")) for c in (x, y)):
        return f"were {_words(x)} {relation} they were {_words(y)}"
    return f"have {_words(x)} {relation} {_words(y)}"


def _plural(name: str) -> str:
    return name.replace("_", " ")


def _singular(name: str) -> str:
    words = name.replace("_", " ")
    if words.endswith("ies"):
        return words[:-3] + "y"
    return words[:-1] if words.endswith("s") and not words.endswith("ss") else words


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _alias(words: str) -> str:
    return "_".join(w for w in "".join(ch if ch.isalnum() else " " for ch in words.lower()).split()) or "n"


def _q(name: str) -> str:
    from rag.data.tableset import _ident

    return _ident(name)


def _lit(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"
