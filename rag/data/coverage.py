"""What the index holds no record of: names and years a question asks about that neither the tables nor the
documents contain.

A question about data that is not there still gets a query that runs: "How many shipments has Falcon Foods booked
with us?" counts rows of a customer the tables do not have, and "How many shipments will Kestrel Freight ship in
March 2026?" counts the rows of a year they do not reach; the answer then states a number from the result (0, or
another customer's) and the number check of the critic finds that number in its evidence. Two checks of the
question itself, with no model call, catch these:

- **names**: a capitalised name in the question ("Falcon Foods", "Paris", "United Kingdom") that no text value of
  the tables and no passage contains. Not names: the first word of a sentence, months, weekdays and quarters
  ("Dec", "Q3"), acronyms of two to five capitals ("CFO", "SLA"), a country's adjective ("Belgian", "Spanish": the
  tables hold the country), and a record id of the tables' shape ("S00004": whether that record exists is the
  query's business).
- **years**: a year in the question (2023, 2026) outside the span of every date column of the tables.

An answer to such a question is returned flagged ``low_confidence``, with the reason (rag.agent.critique); it is
not refused, because "none" can be the true answer (no shipments left from Paris). Only an index with tables is
checked. The rules were written with the ops demo's blind unanswerable questions in view
(golden/ops_unanswerable.jsonl); on 818 answerable questions about the demo they flag 1, and they catch 34 of
351 unanswerable ones (benchmarks/results/coverage.md).

A third check reads the query an answer rests on (:meth:`Coverage.unasked`): asked for something no column
records (a driver, a distance, a buy rate), the writer picks the nearest column there is ("the driver" from
``carriers.name``, "the total km" as ``SUM(weight_kg)``), and the answer states its value. When no column the
query returns shares a word (by root) with the question, counting each column's name and its description, the
answer is flagged with the columns it stated. A query that returns only a row count, or no column of the tables,
is not checked. A column people ask about by another word ("arrive" for ``delivered_on``) is flagged falsely until
its description has that word (the tables' sidecar file, docs/guides/data.md). Written with the same blind questions
in view, it was measured on two sets written after it: 11 more of 80 unanswerable questions flagged, and 3 flags on
answers to answerable ones in eight runs, none of them right (benchmarks/results/critic_columns.md).

A fourth reads the same query's conditions (:meth:`Coverage.invented`): asked about what no column records ("was it
in a temperature-controlled trailer?"), the writer also keeps rows by a value nobody gave (``service_level =
'express'``), and the count it returns answers another question. A condition that compares one column with text
values or a true/false flag is flagged when the question names neither a value (a word of it, digits too, its
root, or its first five letters: "Belgian" for 'Belgium') nor the column, a flag's description has no word of the
question, and no passage shown beside the query states the value (a rule's "gold contract tier"). Dates and
numbers are not read: questions and rules say them in words ("in Q3", "above the cap"). Written with the earlier
blind questions in view, it was measured on three sets written after it: 10 more of 120 unanswerable questions
flagged, none fewer, and no flag on a right answer to the 40 answerable questions of a set written with them
(benchmarks/results/critic_filters.md).

A fifth reads what a query that returns only row counts was asked (:meth:`Coverage.uncounted`): "how many pallets
were on S01049?" counts the shipment's one row, and "was the loss of S00113 reported to the police?" counts the lost
shipment, and the answers say "1 pallet" and "Yes". When the plural "how many" counts, or the participle a yes/no
question opens with ("was it *reported*"), is no word of the tables the query reads (name, aliases, description,
columns and their descriptions) nor of any text value ("rejected"), the answer is flagged. Off by default
(``critic_checks`` adds it as ``counts``); benchmarks/results/critic_counts.md measures it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rag.data.schemalink import MODALS, MONTHS, STOP, VERBS, Vocabulary, id_shape, root, words
from rag.data.sqlrepair import read_tables

WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
DATE_WORDS = MONTHS | WEEKDAYS | {m[:3] for m in MONTHS} | {"sept", "q1", "q2", "q3", "q4", "h1", "h2"}
_NAME = re.compile(r"\b[A-Z][\w&'-]*(?:\s+(?:[A-Z][\w&'-]*|of|de|and))*(?<!\sof)(?<!\sde)(?<!\sand)\b")
_ACRONYM = re.compile(r"[A-Z]{2,5}s?")
_DEMONYM = re.compile(r"[A-Z][a-z]+(?:ian|ish|ese)")  # "Belgian customers": a country's adjective, not a name
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")
_SENTENCE_END = re.compile(r"[.?!:;]\s*$")
_DATE = re.compile(r"\d{4}-\d{2}")
PREFIX = 5  # letters a question's word and a filter's value share to match: a demonym and its country
# the verbs whose past form names a status value and shares no root with them ("did we lose" for status = 'lost')
IRREGULAR = {"lose": "lost", "pay": "paid", "send": "sent", "hold": "held", "buy": "bought", "sell": "sold",
             "break": "broken", "take": "taken", "leave": "left", "write": "written"}
COUNT_WORDS = {"times", "ones", "cases", "instances", "occasions", "records", "rows", "entries", "items", "them",
               "those", "these", "total", "different", "distinct", "unique", "separate", "individual"}  # counted
# words that name no thing: "how many times", "how many distinct ..." (the noun after them is the thing)
COUNTED_WORDS = 6  # words after "how many" read for the counted thing
DATE_SECONDS = 1.0  # per date column: a span that takes longer to read is left out


@dataclass
class Coverage:
    """The index's text (documents and the tables' text values) and the years its dated rows span."""

    text: str = ""  # lower-cased: the passages and the text values, one per line
    values: set[tuple[str, ...]] = field(default_factory=set)  # the tables' text values as word tuples
    ids: set[str] = field(default_factory=set)  # the shapes of the tables' record ids (rag.data.schemalink.id_shape)
    years: tuple[int, int] | None = None  # first and last year of any date column; None without dates
    columns: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # (table, column) -> (name, description)
    tables: dict[str, str] = field(default_factory=dict)  # table -> its name, aliases and description, as one text
    absent: Any = None  # rag.data.unrecorded.Unrecorded: a value no row holds, a time of day from a date; None: not read

    @classmethod
    def for_index(cls, index: Any, warehouse: Any, vocab: Vocabulary | None = None) -> Coverage:
        """From an index with tables: its passages, the text values ``vocab`` read (rag.data.schemalink) and the
        date columns' spans, read through the warehouse's guard."""
        vocab = vocab or Vocabulary.for_index(index, warehouse)
        dated = date_spans(index.tables_record or {}, warehouse)
        spans = list(dated.values())
        years = (min(a.year for a, _ in spans), max(b.year for _, b in spans)) if spans else None
        text = "\n".join([*(c.text.lower() for c in index.chunks), *(" ".join(v) for v in vocab.values)])
        columns = {(t["name"].lower(), c["name"].lower()): (c["name"], _about(c))
                   for t in (index.tables_record or {}).get("tables", []) for c in t.get("columns", [])}
        tables = {t["name"].lower(): " ".join([t["name"], *(t.get("aliases") or []), t.get("description") or ""])
                  for t in (index.tables_record or {}).get("tables", [])}
        from rag.data.unrecorded import Unrecorded

        return cls(text=text, values=vocab.values, ids=set(vocab.ids), years=years,  # vocab.names: values too
                   columns=columns, tables=tables, absent=Unrecorded.from_record(index.tables_record or {}, vocab.column_values, dated))

    def holds(self, name: str) -> bool:
        """Whether a passage or a text value contains ``name`` (as words, any case)."""
        toks = tuple(words(name))
        if not toks:
            return True
        if any(_contains(value, toks) for value in self.values):
            return True
        return re.search(r"(?<![a-z0-9])" + r"\W+".join(map(re.escape, toks)) + r"(?![a-z0-9])", self.text) is not None

    def gaps(self, question: str) -> list[str]:
        """Why the index cannot hold the answer: a name or a year it has no record of; [] when none."""
        found = [f"nothing in the tables or documents mentions {name!r}" for name in names(question)
                 if id_shape(name) not in self.ids and not self.holds(name)]
        if self.years is not None:
            first, last = self.years
            found += [f"the tables' dates run from {first} to {last}; {year} is outside them"
                      for year in sorted({int(y) for y in _YEAR.findall(question)}) if not first <= year <= last]
        return found

    def records(self, question: str) -> list[str]:
        """The words of ``question`` that name a record by an id of the tables' shape ("CL0036"), as written."""
        return list(dict.fromkeys(w for w in re.findall(r"[\w-]+", question) if id_shape(w) in self.ids))

    def invented(self, question: str, sql: str, passages: str = "", told: Iterable[str] = ()) -> list[str]:
        """The conditions of ``sql`` that keep rows by a value neither ``question`` nor ``passages`` (the passages
        shown beside the query) mentions, nor the value links ``told`` the writer for it ('CU054' for the customer
        the question names; module docstring); [] when there are none or it does not parse."""
        asked, said = _roots(question), set(words(passages))
        given = {str(v).strip().casefold() for v in told}
        question_words = set(words(question))
        question_words |= {IRREGULAR[w] for w in question_words if w in IRREGULAR}
        found = []
        for column, values, condition in filters(sql):
            about = " ".join(" ".join(v) for (_, c), v in self.columns.items() if c == column)
            if _roots(column) & asked or (values is None and _roots(about) & asked):
                continue  # the question names the column ("what status"), or a flag by its description
            if values is not None and any(_mentioned(v, question_words, asked, said) or str(v).strip().casefold() in given
                                          for v in values):
                continue
            found.append(condition)
        return found

    def uncounted(self, question: str, sql: str) -> str | None:
        """What ``question`` counts ("how many pallets") or says happened ("was it reported ...?"), when ``sql``
        returns only row counts and no table it reads records that by name, alias, column, description or text
        value (module docstring); None otherwise."""
        thing, happened = counted(question), occurred(question)
        if thing is None and happened is None or not counts_only(sql):
            return None
        read = {t for t, _ in self.columns} & set(tables_read(sql))
        if not read:  # no table of the index: nothing to compare the question's words with
            return None
        about = " ".join([*(self.tables.get(t, t) for t in read), *(" ".join(v) for (t, _), v in self.columns.items()
                                                                   if t in read)])
        known = _roots(about) | {w for value in self.values for w in value}
        tables = ", ".join(sorted(read))
        if thing is not None and not _known(thing, known):
            return f"it counts rows of {tables}, and no column of them records {thing!r}"
        if happened is not None and not _known(happened, known):
            return f"it counts rows of {tables} to say whether it was {happened}, which no column of them records"
        return None

    def unasked(self, question: str, sql: str) -> list[str]:
        """The columns ``sql`` returns, when none of them is what ``question`` asks about (module docstring); []
        when one is, or when the query returns no column of the tables (a row count) or does not parse."""
        returned = list(dict.fromkeys(c for c in returned_columns(sql) if c in self.columns))
        asked = _roots(question)
        if not returned or any(_roots(" ".join(self.columns[c])) & asked for c in returned):
            return []  # the table's name is not the column's: "shipments" would link every column of shipments
        return [f"{table}.{name}" + (f" ({about})" if about else "")
                for table, name, about in ((t, *self.columns[(t, c)]) for t, c in returned)]


def _about(column: dict[str, Any]) -> str:
    """What a column's sidecar says of it: its description, and the other words it is called by (its aliases)."""
    about = (column.get("description") or "").strip().rstrip(".")
    aliases = column.get("aliases") or []
    return f"{about} (also called: {', '.join(aliases)})".strip() if aliases else about


def counted(question: str) -> str | None:
    """The plural a "how many ..." question counts ("how many pallets were loaded" -> "pallets"; "how many of Orchid
    Pharma's claims came in" -> "claims"): the last plural before the verb or the first preposition after a content
    word; None without one ("how many kg"), or for a generic count word ("how many times")."""
    toks = words(question)
    for i in range(len(toks) - 1):
        if toks[i] == "how" and toks[i + 1] == "many":
            span: list[str] = []
            for t in toks[i + 2:i + 2 + COUNTED_WORDS]:
                if t in VERBS or t in MODALS or t in STOP and span:
                    break
                if t not in STOP:
                    span.append(t)
            plurals = [t for t in span if t.endswith("s") and not t.endswith("ss") and t not in COUNT_WORDS]
            return plurals[-1] if plurals else None
    return None


def occurred(question: str) -> str | None:
    """What a yes/no question says happened ("Was that breach reported to the safety officer?" -> "reported"): the
    first past participle after a sentence's opening was/were/is/are/has/have/had; None for any other question."""
    for part in re.split(r"[.?!;]\s+", question):
        toks = words(part)
        if toks and toks[0] in {"was", "were", "is", "are", "has", "have", "had"}:
            return next((t for t in toks[1:1 + COUNTED_WORDS] if t.endswith("ed") and len(t) > 4
                         or t in IRREGULAR.values()), None)
    return None


def _known(word: str, known: set[str]) -> bool:
    """Whether ``word`` or its root is one of ``known``, or shares its first PREFIX letters with one of them."""
    mine = root(word)
    return word in known or mine in known or any(
        len(k) >= PREFIX and mine.startswith(k[:PREFIX]) and k.startswith(mine[:PREFIX]) for k in known)


def parse_sql(sql: str) -> Any:
    """``sql`` as sqlglot's tree (DuckDB's dialect), or None when it does not parse."""
    import sqlglot

    try:
        return sqlglot.parse_one(sql, read="duckdb")
    except (sqlglot.errors.SqlglotError, ValueError):
        return None


def _outer_select(tree: Any) -> Any:
    """The outermost SELECT of a parsed statement (a CTE's main query too), or None."""
    from sqlglot import exp

    return None if tree is None else tree if isinstance(tree, exp.Select) else tree.find(exp.Select)


def counts_only(sql: str) -> bool:
    """Whether the outermost SELECT of ``sql`` returns nothing but COUNT(...) expressions."""
    from sqlglot import exp

    select = _outer_select(parse_sql(sql))
    return bool(select and select.expressions) and all(
        isinstance(e.unalias(), exp.Count) for e in select.expressions)


def tables_read(sql: str) -> list[str]:
    """The tables ``sql`` reads anywhere, lower-cased; [] when it does not parse."""
    from sqlglot import exp

    tree = parse_sql(sql)
    return [] if tree is None else [t.name.lower() for t in tree.find_all(exp.Table)]


def returned_columns(sql: str) -> list[tuple[str, str]]:
    """(table, column) of every column the outermost SELECT's expressions read, lower-cased, the table resolved
    through its alias (rag.data.sqlrepair.read_tables; a column written without one: each table that SELECT reads);
    [] when ``sql`` does not parse."""
    from sqlglot import exp

    select = _outer_select(parse_sql(sql))
    if select is None:
        return []
    read = read_tables(select)
    found = []
    for column in (c for e in select.expressions for c in e.find_all(exp.Column)):
        owners = [read[column.table.lower()]] if column.table.lower() in read else [] if column.table else read.values()
        found += [(t, column.name.lower()) for t in owners]
    return found


def filters(sql: str) -> list[tuple[str, list[str] | None, str]]:
    """(column, its text values or None for a true/false flag, the condition as sqlglot writes it) of every
    condition of ``sql`` (anywhere: WHERE, ON, HAVING, subqueries) that compares one column with text values or a
    boolean (=, <>, IN, LIKE); dates and numbers are left out (the question and the rules give those as words: "in
    Q3", "the cap"). [] when ``sql`` does not parse."""
    from sqlglot import exp

    tree = parse_sql(sql)
    if tree is None:
        return []
    found = []
    for condition in tree.find_all(exp.EQ, exp.NEQ, exp.In, exp.Like, exp.ILike, bfs=False):
        columns = list(condition.find_all(exp.Column))
        if len(columns) != 1 or condition.find(exp.Select):
            continue
        texts = [v.this for v in condition.find_all(exp.Literal) if v.is_string]
        flags = list(condition.find_all(exp.Boolean))
        if texts and not all(_DATE.match(t) for t in texts):
            found.append((columns[0].name.lower(), [t.replace("%", " ") for t in texts], condition.sql("duckdb")))
        elif flags and not texts:
            found.append((columns[0].name.lower(), None, condition.sql("duckdb")))
    return found


def _mentioned(value: str, question_words: set[str], asked: set[str], said: set[str]) -> bool:
    """Whether a filter's text ``value`` is one the question names (a word of it, digits too: "S00004"; its root; or
    its first five letters: "Belgian" for 'Belgium') or one the passages state (every word of it: a rule's "gold")."""
    toks = [w for w in words(value) if w not in STOP and len(w) >= 2]
    prefixes = {w[:PREFIX] for w in question_words if len(w) >= PREFIX}
    return (any(t in question_words or t[:PREFIX] in prefixes for t in toks) or bool(_roots(value) & asked)
            or (bool(toks) and all(t in said for t in toks)))


def _roots(text: str) -> set[str]:
    """The content words of ``text`` and their roots (rag.data.schemalink.root), "e.g. VALUE" examples left out."""
    found = set(re.findall(r"[a-z]+", re.sub(r"e\.g\. \S+", " ", text.replace("_", " ").lower()))) - STOP
    return {root(w) for w in found if len(w) >= 3} | {w for w in found if len(w) >= 2}


def names(question: str) -> list[str]:
    """The capitalised names of ``question``, each once (module docstring: what is not a name)."""
    found: list[str] = []
    for m in _NAME.finditer(question):
        parts = m.group(0).split()
        at_start = not question[:m.start()].strip() or bool(_SENTENCE_END.search(question[:m.start()]))
        if at_start:
            parts = parts[1:]  # "How", "Which": capitalised because they start the sentence
        while parts and (parts[0].lower() in DATE_WORDS or _ACRONYM.fullmatch(parts[0])
                         or parts[0] in {"of", "de", "and", "I"}):
            parts = parts[1:]
        parts = [p for p in parts if p.lower() not in DATE_WORDS]
        name = re.sub(r"['\u2019]s$", "", " ".join(parts))  # "Stellar Transport's" names Stellar Transport
        if name and not _ACRONYM.fullmatch(name) and not _DEMONYM.fullmatch(name) and name not in found:
            found.append(name)
    return found


def _contains(value: tuple[str, ...], toks: tuple[str, ...]) -> bool:
    n = len(toks)
    return any(value[i:i + n] == toks for i in range(len(value) - n + 1))


def date_spans(record: dict[str, Any], warehouse: Any) -> dict[tuple[str, str], tuple[dt.date, dt.date]]:
    """(first, last) date of each DATE or TIMESTAMP column, per (table, column) as the record spells them; a column
    that cannot be read in DATE_SECONDS, or holds no date, is left out."""
    from rag.errors import DataError

    found = {}
    for table in record.get("tables") or []:
        for col in table.get("columns", []):
            if "DATE" not in str(col.get("type", "")).upper() and "TIMESTAMP" not in str(col.get("type", "")).upper():
                continue
            name, source = '"' + col["name"].replace('"', '""') + '"', '"' + table["name"].replace('"', '""') + '"'
            try:
                result = warehouse.run(f"SELECT min({name}), max({name}) FROM {source}", time_limit_s=DATE_SECONDS,
                                       max_rows=1)
            except DataError:
                continue
            first, last = result.rows[0] if result.rows else (None, None)
            if isinstance(first, dt.date) and isinstance(last, dt.date):
                found[(table["name"], col["name"])] = (first, last)
    return found
