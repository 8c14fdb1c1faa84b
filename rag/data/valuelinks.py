"""Value links: the table values and record ids a question names, told to the SQL writer as the tables spell them.

A question names a customer ("Orchid Pharma GmbH"), a category ("express", "open"), a city or a record
("S00725", "claim CL0221"); the SQL writer sees only the schema and three example values per column, so it guesses
an id (``customer_id = 'CU001'``), a spelling or a column. Here the question's words are matched against the text
values the tables hold (the distinct values rag.data.schemalink reads for the cue router: columns with at most
VALUES_PER_COLUMN values) and against the shape of each column's example ids; each match becomes one line shown
beside the schema, no model call:

    'Orchid Pharma GmbH' is a value of customers.name (its customer_id is 'CU005')
    'express' is a value of shipments.service_level
    'S00725' is shipments.shipment_id

A value matches as whole words, any case; the longest match wins where matches overlap. With ``short``
(``short_names``), a name said by its leading words ("Orchid Pharma") gets the stored name's line (rag.data.shortnames). A name (a value of a column
with NAMES_FROM or more values) comes with its row's key when its table has one (its first column, named ``...id``)
and exactly one row holds it. An id-shaped word is looked up in each column whose examples have its shape, and
named by the key column that holds it, else by every column that does. Lookups go through the warehouse's guard.
At most ``limit`` lines (LINKS default). ``sql_links = "values"`` tells all of these; ``"names"`` only the names (a
value of a column with NAMES_FROM or more values: a customer, a carrier, a city) and the ids, not the categories
("express", "open"), whose lines measured mixed (benchmarks/results/sql_links_stage2.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rag.data.schemalink import NAMES_FROM, id_shape, table_keys, value_words, words
from rag.errors import DataError

LINKS = 8  # lines at most: the values a question names are few; more would crowd the schema
LOOKUP_SECONDS = 1.0  # per key or id looked up


@dataclass
class ValueLinks:
    warehouse: Any  # rag.data.Warehouse: keys and ids are looked up through its guard
    values: dict[str, list[str]]  # per "table.column", its distinct text values (rag.data.schemalink.column_values)
    keys: dict[str, str] = field(default_factory=dict)  # table -> its key column
    shapes: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # id shape -> [(table, column)]
    limit: int = LINKS
    names_only: bool = False  # only names (a value of a column with NAMES_FROM or more values) and ids, no categories
    short: Any = None  # rag.data.shortnames.ShortNames: a name said by its leading words links too; None: off
    paths: Any = None  # rag.data.joinpaths.JoinPaths: how a table asked about reaches a named record's; None: off

    def __post_init__(self) -> None:
        # each value as the question's words would spell it -> (the value as stored, the columns holding it)
        self._spelled: dict[tuple[str, ...], tuple[str, list[str]]] = {}
        for column, texts in self.values.items():
            for text in texts:
                # an id is looked up by its shape, in the column it keys
                if (key := value_words(text)) and id_shape(text) is None:
                    self._spelled.setdefault(key, (text, []))[1].append(column)

    @classmethod
    def from_record(cls, record: dict[str, Any], warehouse: Any, values: dict[str, list[str]],
                    limit: int = LINKS, names_only: bool = False, short: Any = None,
                    paths: bool = False) -> ValueLinks:
        """From a tables record (its columns' examples give the id shapes and keys) and the columns' values; ``short``
        (rag.data.shortnames.ShortNames) links a name said by its leading words ("Birch Foods") too; ``paths`` adds
        the join path from a table the question asks about to a named record's table (rag.data.joinpaths)."""
        keys, shapes = table_keys(record), {}
        for table in record.get("tables") or []:
            for col in table.get("columns") or []:
                for shape in {s for s in map(id_shape, col.get("examples") or []) if s}:
                    shapes.setdefault(shape, []).append((table["name"], col["name"]))
        from rag.data.joinpaths import JoinPaths

        return cls(warehouse, values, keys, shapes, limit, names_only, short,
                   JoinPaths.from_record(record) if paths else None)

    def lines(self, question: str) -> list[str]:
        """One line per value or id ``question`` names (module docstring), in the question's order; with ``paths``,
        then one per table it asks about that reaches a named record's table only through another."""
        toks = words(question)
        found: list[tuple[int, int, str]] = []  # (start, end, line)
        records: list[str] = []  # the tables of the records named: a name with its key, an id
        for start, end, columns, value in self._values(toks, question):
            if any(s < end and start < e for s, e, _ in found):
                continue  # inside a longer match
            if self.names_only and all(len(self.values[c]) < NAMES_FROM for c in columns):
                continue  # a category ("express", "open"): told only with sql_links = "values"
            found.append((start, end, self._value_line(value, columns)))
            records += [c.split(".", 1)[0] for c in columns if len(self.values[c]) >= NAMES_FROM]
        for i, tok in enumerate(toks):
            if any(s <= i < e for s, e, _ in found) or (shape := id_shape(tok)) not in self.shapes:
                continue
            if told := self._id_line(tok, self.shapes[shape]):
                found.append((i, i + 1, told[0]))
                records += told[1]
        named = list(dict.fromkeys(line for _, _, line in sorted(found)))
        if self.paths is not None:
            asked = self.paths.asked(question)
            named += [line for goal in dict.fromkeys(records) for start in asked
                      if (line := self.paths.line(start, goal)) and line not in named]
        return named[: self.limit]  # a value named twice: once

    def _values(self, toks: list[str], question: str) -> list[tuple[int, int, list[str], str]]:
        """(start, end, columns, value) per place a value, or a name by its leading words, occurs in ``toks``
        (the words of ``question``), longest first."""
        hits = []
        for key, (text, columns) in self._spelled.items():
            n = len(key)
            hits += [(i, i + n, columns, text) for i in range(len(toks) - n + 1) if tuple(toks[i:i + n]) == key]
        if self.short is not None:
            hits += [(start, end, columns, text) for start, end, text, columns in self.short.spans(question)]
        return sorted(hits, key=lambda h: (h[0] - h[1], h[0]))

    def _value_line(self, value: str, columns: list[str]) -> str:
        line = f"{_literal(value)} is a value of {', '.join(columns)}"
        table, column = columns[0].split(".", 1)
        key = self.keys.get(table)
        if len(columns) > 1 or len(self.values[columns[0]]) < NAMES_FROM or not key or key == column:
            return line  # a category ("express"), or a value with no key of its own to give
        rows = self._lookup(f'SELECT "{key}" FROM "{table}" WHERE "{column}" = {_literal(value)} LIMIT 2')
        return f"{line} (its {key} is {_literal(str(rows[0][0]))})" if len(rows) == 1 and rows[0][0] is not None \
            else line

    def _id_line(self, token: str, columns: list[tuple[str, str]]) -> tuple[str, list[str]] | None:
        """(the line, the tables it names) for an id-shaped word the tables hold; None when none does."""
        for spelled in dict.fromkeys((token.upper(), token)):  # ids are mostly upper case; the words are lowered
            holding = [(t, c) for t, c in columns
                       if self._lookup(f'SELECT 1 FROM "{t}" WHERE "{c}" = {_literal(spelled)} LIMIT 1')]
            if holding:
                keyed = [(t, c) for t, c in holding if self.keys.get(t) == c] or holding
                return f"{_literal(spelled)} is {', '.join(f'{t}.{c}' for t, c in keyed)}", [t for t, _ in keyed]
        return None

    def _lookup(self, sql: str) -> list[list[Any]]:
        try:
            return self.warehouse.run(sql, max_rows=2, time_limit_s=LOOKUP_SECONDS).rows
        except DataError:  # a lookup the guard or DuckDB refuses: no line from it
            return []


def _literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


def told_values(lines: list[str]) -> list[str]:
    """The values ``lines`` (:meth:`ValueLinks.lines`) tell, as stored: the names, keys and ids in their quotes."""
    return [m.replace("''", "'") for line in lines for m in re.findall(r"'((?:[^']|'')*)'", line)]


def section(lines: list[str]) -> str:
    """``lines`` (:meth:`ValueLinks.lines`) as a block to append to the schema the writer reads; "" when none."""
    if not lines:
        return ""
    return "\n\nTHE QUESTION NAMES (as the tables spell them):\n" + "\n".join(f"  {line}" for line in lines)
