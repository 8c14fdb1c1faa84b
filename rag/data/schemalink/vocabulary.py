"""What the tables and documents of an index call things, read once when the agent starts: the tables' names,
columns, descriptions, text values, id shapes and aliases, and the documents' two-word terms (rag.data.schemalink.cues
reads a question against it)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from rag.data.schemalink.lexicon import (
    UNITS,
    adjacent,
    id_shape,
    is_content,
    naming_clause,
    root,
    stem,
    terms,
    value_words,
    words,
)

VALUE_CHARS = 40  # longer text values (notes, descriptions) are not names a question repeats
VALUES_PER_COLUMN = 500  # a column with more distinct values (an id, free text) gives no values to link
VALUES_SECONDS = 1.0  # per column: a large table's column that takes longer gives no values
VALUES_BUDGET_S = 5.0  # all columns together: the agent starts in bounded time over any tables
NAMES_FROM = 10  # distinct values from which a column's values are names (customers, cities), not categories
DOC_CHUNKS = 50_000  # passages read for the documents' two-word terms; a larger corpus's later chunks are not
COMMON_TERM = 0.3  # a term in more of the passages than this share is the corpus's name for itself ("Kestrel
# Freight"), not a term of one rule
ID_NOUNS = {"number", "no", "ref", "reference", "code"}  # what people call an id column: "the shipment number"


def _quoted(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


@dataclass
class Vocabulary:
    """How a question can name the tables, and the two-word terms of the documents."""

    tables: set[str] = field(default_factory=set)  # table names' words, singular
    columns: set[str] = field(default_factory=set)  # column names' words, singular, without units
    column_phrases: set[tuple[str, ...]] = field(default_factory=set)
    values: set[tuple[str, ...]] = field(default_factory=set)  # text values as word tuples
    names: set[tuple[str, ...]] = field(default_factory=set)  # values of a column with NAMES_FROM or more values
    ids: set[str] = field(default_factory=set)  # id shapes, from example values
    described: set[str] = field(default_factory=set)  # roots of the words naming a column in its description
    doc_terms: set[tuple[str, str]] = field(default_factory=set)  # terms found in the documents
    # per "table.column", its distinct text values as stored (column_values), for rag.data.valuelinks
    column_values: dict[str, list[str]] = field(default_factory=dict)
    pairs: set[tuple[str, str]] = field(default_factory=set)  # roots of two words the tables say together (below)
    aliases: dict[str, set[str]] = field(default_factory=dict)  # per table, its aliases' nouns, singular
    short: Any = None  # rag.data.shortnames.ShortNames: names said by their leading words ("Birch Foods"); None: off

    @classmethod
    def from_record(cls, record: dict[str, Any], values: dict[str, list[str]] | None = None,
                    documents: Iterable[str] = (), short_names: bool = False) -> Vocabulary:
        """From a tables record (rag.data.build_database), per ``table.column`` its distinct text values, and the
        documents' texts; with ``short_names``, a name said by its leading words links too (rag.data.shortnames)."""
        vocab = cls(column_values=dict(values or {}))
        if short_names:
            from rag.data.shortnames import ShortNames

            vocab.short = ShortNames.from_record(record, vocab.column_values)
        for table in record.get("tables") or []:
            vocab.tables |= {stem(w) for w in words(table["name"]) if w not in UNITS}
            aliases = {stem(words(a)[-1]) for a in table.get("aliases") or [] if words(a)}  # "haulage firm": firm
            vocab.tables |= aliases
            vocab.aliases[table["name"]] = aliases
            for col in table.get("columns", []):
                parts = [stem(w) for w in words(col["name"]) if w not in UNITS]
                kind = str(col.get("type", "")).upper()
                vocab.columns |= set(parts) | ({"date"} if "DATE" in kind or "TIMESTAMP" in kind else set())
                if len(parts) > 1:
                    vocab.column_phrases.add(tuple(parts))
                for alias in col.get("aliases") or []:  # "hazmat" for hazardous, "pickup date" for shipped_on
                    said = [stem(w) for w in words(alias) if w not in UNITS]
                    vocab.columns |= set(said)
                    if len(said) > 1:
                        vocab.column_phrases.add(tuple(said))
                if len(parts) == 1 and words(col["name"])[-1:] == ["id"]:  # shipment_id: "shipment number", "claim no"
                    vocab.column_phrases |= {(parts[0], w) for w in ID_NOUNS}
                naming = words(naming_clause(col.get("description")))
                if "BOOL" not in kind:  # a flag's description is its condition, often a rule's own term
                    vocab.described |= {root(w) for w in naming if is_content(w)}
                    vocab.pairs |= adjacent(naming)
                vocab.pairs |= adjacent(words(col["name"]))
                if "DATE" in kind or "TIMESTAMP" in kind:  # "promised date", "collection date" for promised_on
                    vocab.pairs |= {(root(w), "date") for w in words(col["name"]) + naming if is_content(w)}
                for text in (values or {}).get(f'{table["name"]}.{col["name"]}', ()):  # "gold tier", "express
                    vocab.pairs |= adjacent(words(text))  # service", "status open": a value beside its column
                    vocab.pairs |= {p for v in words(text) for c in words(col["name"])
                                    for p in ((root(v), root(c)), (root(c), root(v)))}
                vocab.ids |= {s for s in map(id_shape, col.get("examples", [])) if s}
        for texts in (values or {}).values():
            for text in texts:
                if toks := value_words(text):
                    vocab.values.add(toks)
                    if len(texts) >= NAMES_FROM:
                        vocab.names.add(toks)
        counts: dict[tuple[str, str], int] = {}
        n = 0
        for n, text in enumerate(documents, 1):
            for term in terms(text):
                counts[term] = counts.get(term, 0) + 1
            if n == DOC_CHUNKS:
                break
        vocab.doc_terms = {t for t, c in counts.items() if c <= max(1, COMMON_TERM * n)}
        return vocab

    @classmethod
    def from_warehouse(cls, record: dict[str, Any], warehouse: Any, documents: Iterable[str] = (),
                       short_names: bool = False) -> Vocabulary:
        """From the record, the text values the warehouse holds (:func:`column_values`) and the documents' texts."""
        return cls.from_record(record, column_values(record, warehouse), documents, short_names)

    @classmethod
    def for_index(cls, index: Any, warehouse: Any, short_names: bool = False) -> Vocabulary:
        """The vocabulary of an index with tables: its tables record, the warehouse's values and its passages."""
        return cls.from_warehouse(index.tables_record, warehouse, (c.text for c in index.chunks), short_names)

    def explains(self, word: str) -> bool:
        """Whether ``word`` is one of the tables' own words: a table, a column, a word of a text value, or a word
        of the clause a column's description names it with ("base freight charge", "origin depot city"); a
        hyphenated word when each of its parts is ("gold-tier")."""
        if "-" in word:
            return all(self.explains(part) for part in word.split("-") if part)
        mine = root(word)
        return any(mine.startswith(r) or r.startswith(mine) for r in self.described | set(map(root, self.tables | self.columns))
                   if min(len(r), len(mine)) >= 4) or any(word in v for v in self.values)


    def says(self, a: str, b: str) -> bool:
        """Whether the tables say ``a b`` themselves: both words are theirs (:meth:`explains`) and said together,
        in a column's name or naming clause ("base freight", "credit limit"), a value, or a value beside its
        column's name ("gold tier"); "freight credit" or "weight limit" join words of two columns, a document's
        term."""
        if not (self.explains(a) and self.explains(b)):
            return False
        near = lambda x, y: x == y or min(len(x), len(y)) >= 4 and (x.startswith(y) or y.startswith(x))  # noqa: E731
        ra, rb = root(a), root(b)
        return any(near(ra, p) and near(rb, q) for p, q in self.pairs)


def column_values(record: dict[str, Any], warehouse: Any) -> dict[str, list[str]]:
    """Per ``table.column`` of a text column, its distinct values of at most VALUE_CHARS characters, read through
    the warehouse's guard: a few ms per column of a small table; a column with more than VALUES_PER_COLUMN values,
    or that takes longer than VALUES_SECONDS, or all of them past VALUES_BUDGET_S, gives none."""
    from rag.errors import DataError

    values: dict[str, list[str]] = {}
    started = time.perf_counter()
    for table in record.get("tables") or []:
        for col in table.get("columns", []):
            kind = str(col.get("type", "")).upper()
            if "CHAR" not in kind and "TEXT" not in kind or time.perf_counter() - started > VALUES_BUDGET_S:
                continue
            name, source = _quoted(col["name"]), _quoted(table["name"])
            try:
                result = warehouse.run(f"SELECT DISTINCT {name} FROM {source} WHERE length({name}) <= {VALUE_CHARS}",
                                       max_rows=VALUES_PER_COLUMN, time_limit_s=VALUES_SECONDS)
            except DataError:  # a column the guard or DuckDB will not read this way: no values from it
                continue
            if not result.truncated:
                values[f'{table["name"]}.{col["name"]}'] = [str(r[0]) for r in result.rows if r[0] is not None]
    return values
