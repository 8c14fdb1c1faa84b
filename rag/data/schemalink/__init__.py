"""Routing by schema linking, with no model call: a question's words read against what the index's tables and
documents call things (``Vocabulary``), deciding ``docs``, ``data`` or ``both`` (``read_cues``; the rules are
described in rag.data.schemalink.cues).

- ``lexicon``: words, stems, terms and the word lists the rules read;
- ``vocabulary``: what the tables and documents say, read once per index (``Vocabulary``, ``column_values``);
- ``rows``: whether a question asks for rows of a table; ``rules``: whether it applies a rule of the documents;
- ``cues``: the two read together into a route, with the words that decided it.
"""

from rag.data.schemalink.cues import Cues, read_cues
from rag.data.schemalink.lexicon import (
    AGGREGATES,
    MODALS,
    MONTHS,
    RULE_WORDS,
    STOP,
    UNITS,
    VERBS,
    id_shape,
    is_content,
    key_of,
    root,
    stem,
    table_keys,
    terms,
    value_words,
    words,
)
from rag.data.schemalink.vocabulary import (
    COMMON_TERM,
    DOC_CHUNKS,
    NAMES_FROM,
    VALUE_CHARS,
    VALUES_BUDGET_S,
    VALUES_PER_COLUMN,
    VALUES_SECONDS,
    Vocabulary,
    column_values,
)

__all__ = [
    "AGGREGATES", "COMMON_TERM", "Cues", "DOC_CHUNKS", "MODALS", "MONTHS", "NAMES_FROM", "RULE_WORDS", "STOP", "UNITS",
    "VALUES_BUDGET_S", "VALUES_PER_COLUMN", "VALUES_SECONDS", "VALUE_CHARS", "VERBS", "Vocabulary", "column_values",
    "id_shape", "is_content", "key_of", "read_cues", "root", "stem", "table_keys", "terms", "value_words", "words",
]
