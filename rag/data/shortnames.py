"""Short names: a customer or carrier named by the leading words of its name, as staff say it.

People drop the legal form and the last words of a name: "Birch Foods" for 'Birch Foods S.p.A.', "Zephyr
Chemicals" for 'Zephyr Chemicals S.L.', "Bluefin" for 'Bluefin Logistics'. The tables hold only the whole name, so a
filter on the short form finds no row and a reader matching whole values sees no name at all. Here a question's
words link to a stored name when they are its leading words and start no other value of any text column:

- two or more leading words ("birch foods"), fewer than the whole name, not themselves a whole value;
- one word ("Bluefin") only when the question writes it capitalised and not as its first word, or the question is
  typed all in lower case ("is bluefin under review"), where case says nothing; and no table or column of the
  tables is called by it, so "Express" or "Claims" never becomes a carrier.

Only names link (values of a column with NAMES_FROM or more distinct values: a customer, a carrier, a city), never
a category. Both readers of names use it: the value links the SQL writer is told (rag.data.valuelinks) and the cue
router (rag.data.schemalink), which counts a short name as naming a record, as the whole name does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rag.data.schemalink import NAMES_FROM, UNITS, id_shape, stem, value_words, words

LONGEST = 6  # words in a short name at most


@dataclass
class ShortNames:
    # per short form (leading words, lower case), the name as stored and the columns that hold it
    forms: dict[tuple[str, ...], tuple[str, list[str]]] = field(default_factory=dict)
    schema_words: set[str] = field(default_factory=set)  # the tables' and columns' words, singular

    @classmethod
    def from_record(cls, record: dict[str, Any], values: dict[str, list[str]]) -> ShortNames:
        """From a tables record (its table and column names) and, per ``table.column``, its distinct text values
        (rag.data.schemalink.column_values)."""
        starts: dict[tuple[str, ...], set[str]] = {}  # leading words -> every value they start
        whole: set[tuple[str, ...]] = set()
        names: dict[str, list[str]] = {}  # a name as stored -> its columns
        for column, texts in values.items():
            for text in texts:
                if not (key := value_words(text)) or id_shape(text) is not None:
                    continue
                whole.add(key)
                for n in range(1, min(len(key), LONGEST + 1)):
                    starts.setdefault(key[:n], set()).add(text)
                if len(texts) >= NAMES_FROM:
                    names.setdefault(text, []).append(column)
        forms = {prefix: (text, names[text]) for prefix, texts in starts.items()
                 if len(texts) == 1 and prefix not in whole and (text := next(iter(texts))) in names}
        schema = {stem(w) for table in record.get("tables") or []
                  for name in [table["name"], *(c["name"] for c in table.get("columns") or [])]
                  for w in words(name) if w not in UNITS}
        return cls(forms, schema)

    def spans(self, question: str) -> list[tuple[int, int, str, list[str]]]:
        """(start, end, name as stored, its columns) per short name in ``question``, by the positions of
        rag.data.schemalink.words; longest first, none overlapping another."""
        toks, cased = words(question), words(question, cased=True)
        lower = question == question.lower()  # typed without capitals: case tells a name from a word nowhere
        found: list[tuple[int, int, str, list[str]]] = []
        for n in range(min(LONGEST, len(toks)), 0, -1):
            for i in range(len(toks) - n + 1):
                hit = self.forms.get(tuple(toks[i:i + n]))
                if hit is None or any(s < i + n and i < e for s, e, _, _ in found):
                    continue
                if n == 1 and not ((lower or i > 0 and len(cased) == len(toks) and cased[i][:1].isupper())
                                   and stem(toks[i]) not in self.schema_words):
                    continue
                found.append((i, i + n, *hit))
        return found
