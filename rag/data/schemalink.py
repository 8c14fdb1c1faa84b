"""Routing by schema linking: where a question's answer is, read from its wording and the tables' own vocabulary.

A question is routed to the tables when it asks for something computed from rows of a table it names: a count
("how many open claims"), a total, average or share ("the average weight of express shipments"), a top few ("which
carrier handled the most shipments"), a list ("which customers are key accounts") or a stored value of a named
record ("the credit limit of Redwood Beverages B.V."). The tables are named by their own words: table names, column
names and the values of the tables' text columns (a city, a status, a customer's name), read from the database.
Such a question goes to ``both`` when it also applies a rule that only the documents state: it compares the rows
with a threshold it names but does not give ("more than *the* standard liability cap", against "after *their*
promised date" or "after 1 July", which the rows hold), or uses the words of a rule (policy, limit, deadline,
approval, must, may, should). Every other question goes to the documents: "how many days must a return be
requested within" counts days, not rows of a table, and "how high may pallets be stacked" names no table.

Why not only the model: on the embedded 1.5B model the SourceRouter signature answers close to one constant route
whatever the question (benchmarks/results/data_route.md); the cues need no model call and say why they chose.
The wording cues are English.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

WORD = re.compile(r"[a-z0-9]+(?:['.-][a-z0-9]+)*")
UNITS = {"id", "eur", "usd", "gbp", "kg", "km", "days", "day", "pct", "at", "on", "is", "has", "no", "num", "of"}
VALUE_CHARS = 40  # longer text values (notes, descriptions) are not names a question repeats
NAMES_FROM = 10  # distinct values from which a column's values are names (customers, cities), not categories
VALUES_PER_COLUMN = 500  # a column with more distinct values (an id, free text) gives no values to link
AGGREGATES = {"total", "sum", "average", "avg", "mean", "median", "percentage", "percent", "share", "proportion",
              "ratio", "count", "number"}
SUPERLATIVES = {"most", "least", "highest", "lowest", "largest", "smallest", "fewest", "biggest", "heaviest",
                "lightest", "longest", "shortest", "top", "best", "worst", "latest", "earliest", "oldest", "newest"}
RULE_WORDS = {"policy", "policies", "rule", "rules", "limit", "limits", "cap", "caps", "deadline", "deadlines",
              "threshold", "thresholds", "standard", "minimum", "maximum", "allowed", "permitted", "required",
              "requires", "require", "requirement", "approval", "approve", "sign-off", "signoff", "sla", "breach",
              "break", "breaks", "broke", "violate", "violates", "violated", "escalate", "escalated", "escalation",
              "entitled", "owed", "eligible", "retention", "probation", "penalty", "according"}
MODALS = {"must", "may", "should", "shall", "ought"}
COMPARE = {"than", "above", "below", "over", "under", "exceed", "exceeds", "exceeded", "exceeding", "beyond",
           "outside", "after", "before"}
OWN = {"their", "its", "his", "her", "each", "own"}  # "after their promised date": a column of the same row
WH_START = {"what", "which", "who", "list", "show", "name", "give", "find", "are", "is", "do", "does", "did", "were",
            "was", "have", "has"}
MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"}


def words(text: str) -> list[str]:
    """Lower-case words; "_" splits (column names), a possessive "'s" goes (the policy's -> policy)."""
    return WORD.findall(re.sub(r"['’]s\b", "", str(text).lower().replace("_", " ")))


def stem(word: str) -> str:
    """A plural's singular, roughly (claims -> claim, categories -> category); enough to match table names."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@dataclass
class Vocabulary:
    """The words by which a question names the tables: table nouns, column words, and text values (as word tuples)."""

    tables: set[str] = field(default_factory=set)
    columns: set[str] = field(default_factory=set)
    column_phrases: set[tuple[str, ...]] = field(default_factory=set)
    values: set[tuple[str, ...]] = field(default_factory=set)
    names: set[tuple[str, ...]] = field(default_factory=set)  # values of a column with NAMES_FROM or more

    @classmethod
    def from_record(cls, record: dict[str, Any], values: dict[str, list[str]] | None = None) -> Vocabulary:
        """From a tables record (rag.data.build_database) and, per ``table.column``, its distinct text values."""
        vocab = cls()
        for table in record.get("tables") or []:
            vocab.tables |= {stem(w) for w in words(table["name"]) if w not in UNITS}
            for col in table.get("columns", []):
                parts = [stem(w) for w in words(col["name"]) if w not in UNITS]
                vocab.columns |= set(parts)
                if len(parts) > 1:
                    vocab.column_phrases.add(tuple(parts))
        for texts in (values or {}).values():
            for text in texts:
                toks = tuple(words(text))
                if toks and not all(t.isdigit() for t in toks) and toks not in {("true",), ("false",)}:
                    vocab.values.add(toks)
                    if len(texts) >= NAMES_FROM:
                        vocab.names.add(toks)
        return vocab

    @classmethod
    def from_warehouse(cls, record: dict[str, Any], warehouse: Any) -> Vocabulary:
        """From the record and the text values the warehouse holds (read through its guard, a few ms per column)."""
        values: dict[str, list[str]] = {}
        for table in record.get("tables") or []:
            for col in table.get("columns", []):
                if "CHAR" not in str(col.get("type", "")).upper() and "TEXT" not in str(col.get("type", "")).upper():
                    continue
                name = f'{table["name"]}.{col["name"]}'
                result = warehouse.run(f'SELECT DISTINCT "{col["name"]}" FROM "{table["name"]}" '
                                       f'WHERE length("{col["name"]}") <= {VALUE_CHARS}', max_rows=VALUES_PER_COLUMN)
                if not result.truncated:
                    values[name] = [str(r[0]) for r in result.rows if r[0] is not None]
        return cls.from_record(record, values)


@dataclass
class Cues:
    """What the wording of one question says, and the route it leads to (with the words that decided it)."""

    rows: str | None  # why the question asks for rows of a table, or None
    rule: str | None  # why it applies a rule the documents state, or None

    @property
    def route(self) -> str:
        return ("both" if self.rule else "data") if self.rows else "docs"

    @property
    def reason(self) -> str:
        if not self.rows:
            return "asks for nothing computed from rows of a table: the documents"
        return f"{self.rows}" + (f"; {self.rule}" if self.rule else "; nothing it needs from the documents")


def read_cues(question: str, vocab: Vocabulary) -> Cues:
    toks = words(question)
    stems = [stem(t) for t in toks]
    linked = _linked(toks, stems, vocab)  # positions covered by a value or a column phrase
    nouns = {i for i, s in enumerate(stems) if s in vocab.tables or s in vocab.columns}
    return Cues(rows=_rows(toks, stems, nouns, linked, vocab), rule=_rule(toks, stems, linked, vocab))


def _linked(toks: list[str], stems: list[str], vocab: Vocabulary) -> dict[int, str]:
    found: dict[int, str] = {}
    for phrases, kind, seq in ((vocab.values, "value", toks), (vocab.column_phrases, "column", stems)):
        for n in range(min(6, len(seq)), 0, -1):
            for i in range(len(seq) - n + 1):
                if tuple(seq[i:i + n]) in phrases and not any(j in found for j in range(i, i + n)):
                    found.update({j: kind for j in range(i, i + n)})
    return found


def _rows(toks: list[str], stems: list[str], nouns: set[int], linked: dict[int, str], vocab: Vocabulary) -> str | None:
    table = lambda i: stems[i] in vocab.tables  # noqa: E731
    for i in range(len(toks) - 1):
        if toks[i] == "how" and toks[i + 1] in {"many", "much"}:
            span = range(i + 2, min(len(toks), i + 5))  # "how many open express claims", not "how many days must"
            hit = next((j for j in span if j in nouns), None)
            if hit is not None:
                return f"asks how {toks[i + 1]} ({toks[hit]})"
    if nouns:
        agg = next((t for t in toks if t in AGGREGATES), None)
        if agg:
            return f"asks for a {agg} over {toks[min(nouns)]}"
        for i, t in enumerate(toks):
            if t in {"per", "each"} and i + 1 < len(toks) and (i + 1 in nouns or toks[i + 1] in
                                                                {"month", "year", "quarter", "week"}):
                return f"asks per {toks[i + 1]}"
        if toks and toks[0] in WH_START and any(t in SUPERLATIVES for t in toks):
            return f"asks for the {next(t for t in toks if t in SUPERLATIVES)} {toks[min(nouns)]}"
    if toks and toks[0] in WH_START:
        for j in range(1, min(len(toks), 5)):
            if table(j) and toks[j] != stems[j]:  # "which carriers", "are any bronze-tier carriers"
                return f"asks which {toks[j]}"
    for i, t in enumerate(toks):
        plural = next((j for j in range(i + 1, min(len(toks), i + 4)) if table(j) and toks[j] != stems[j]), None)
        if t == "all" and plural is not None:  # "all express shipments"
            return f"asks about all {toks[plural]}"
    named = _named(toks, vocab)
    if named and toks and toks[0] in WH_START and any(stems[i] in vocab.columns for i in nouns - set(named)):
        return f"asks for a stored value of {' '.join(toks[i] for i in sorted(named))}"
    return None


def _named(toks: list[str], vocab: Vocabulary) -> set[int]:
    found: set[int] = set()
    for n in range(min(6, len(toks)), 0, -1):
        for i in range(len(toks) - n + 1):
            if tuple(toks[i:i + n]) in vocab.names:
                found |= set(range(i, i + n))
    return found


def _rule(toks: list[str], stems: list[str], linked: dict[int, str], vocab: Vocabulary) -> str | None:
    for i, t in enumerate(toks):
        if t in COMPARE and i + 1 < len(toks):
            j = i + 1 if t != "than" else i + 1
            if toks[j] in {"the", "a", "an"} and j + 1 < len(toks) and not (
                    toks[j + 1].isdigit() or toks[j + 1] in MONTHS or toks[j + 1] in {"first", "last", "end"}):
                return f"compares with a threshold it does not give ('{' '.join(toks[i:i + 5])}')"
    for i, t in enumerate(toks):
        if (t in RULE_WORDS or t in MODALS and not _month_may(toks, i)) and i not in linked:
            return f"names a rule ('{t}')"
    return None


def _month_may(toks: list[str], i: int) -> bool:
    """'in May 2024': the month, not the modal."""
    return toks[i] == "may" and (i > 0 and toks[i - 1] in {"in", "of", "since", "until", "during"}
                                 or i + 1 < len(toks) and toks[i + 1].isdigit())
