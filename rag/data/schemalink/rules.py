"""Whether a question applies something only the documents state: a threshold it names but does not give, a
rule's words, or a term of the documents that the tables do not say (rag.data.schemalink.cues)."""

from __future__ import annotations

from rag.data.schemalink.lexicon import (
    AGGREGATES,
    COMPARE,
    EXCLUDING,
    IMPLICIT,
    MONTHS,
    PHRASAL,
    QUASI,
    REQUESTS,
    RULE_WORDS,
    THRESHOLD,
    is_content,
    modal,
    root,
    stem,
    words,
    would,
)
from rag.data.schemalink.vocabulary import Vocabulary


def asks_rule(toks: list[str]) -> bool:
    """Whether the question's verb is a rule: "what is the heaviest X is allowed to be", "must a Y ...": a modal, or
    "have to"/"allowed to", in a question that neither counts nor lists rows outright (those apply the rule)."""
    return any(modal(toks, k) for k in range(len(toks))) or any(pair in QUASI for pair in zip(toks, toks[1:]))


def read_rule(toks: list[str], linked: dict[int, str], vocab: Vocabulary) -> str | None:
    excluded = _excluded(toks)
    for i, t in enumerate(toks[:-1]):
        nxt = toks[i + 1]
        if t in COMPARE and nxt in THRESHOLD and i + 2 < len(toks) and not (
                toks[i + 2].isdigit() or toks[i + 2] in MONTHS or toks[i + 2] in {"first", "last", "end", "start"}
                or _row_value(toks[i + 2:i + 4], vocab) or i + 2 in excluded):
            return f"compares with a threshold it does not give ('{' '.join(toks[i:i + 5])}')"
    columns = {stem(toks[j]) for j, kind in linked.items() if kind == "column"}
    for i, t in enumerate(toks):
        if t in RULE_WORDS and linked.get(i) == "value" and _plain_sense(toks, i, linked, vocab):
            return f"names a rule ('{t}')"
        if i in linked or i in excluded:
            continue
        if t in {"need", "needs"} and i and toks[i - 1] in REQUESTS and toks[i + 1:i + 2] != ["to"]:
            continue
        if any((t, p) in PHRASAL for p in toks[i + 1:i + 5]) or stem(t) in columns:  # "break the claims down by
            continue  # status"; "limit" after "credit limits" is the column again
        if t in RULE_WORDS or t in IMPLICIT or modal(toks, i) or would(toks, i):
            return f"names a rule ('{t}')"
        if i + 1 < len(toks) and (t, toks[i + 1]) in QUASI:
            return f"names a rule ('{t} {toks[i + 1]}')"
        if i + 1 < len(toks) and (t, toks[i + 1]) in {("in", "time")}:  # "filed in time": before a deadline
            return f"compares with a deadline it does not give ('{t} {toks[i + 1]}')"
    for a in range(len(toks) - 1):
        b = a + 1
        if a in linked and b in linked or not (is_content(toks[a]) and is_content(toks[b])) or a in excluded:
            continue
        if stem(toks[a]) in vocab.tables or stem(toks[b]) in vocab.tables:  # "customer raised", "shipments
            continue  # handled": a table's own noun with its verb
        for x, y in _pairs(toks[a], toks[b]):
            if (root(x), root(y)) in vocab.doc_terms and not vocab.says(x, y):
                return f"uses a term of the documents ('{toks[a]} {toks[b]}')"
    return None


def _pairs(a: str, b: str) -> list[tuple[str, str]]:
    """The word pairs two adjacent words make, hyphenated words also by their parts: ("severe-delay", "credits")
    -> (severe-delay, credits), (severe, delay), (delay, credits)."""
    if "-" not in a + b:
        return [(a, b)]
    parts = [p for p in f"{a}-{b}".split("-") if len(p) > 3]  # not "non-key"
    return [(a, b)] + [(x, y) for x, y in zip(parts, parts[1:]) if is_content(x) and is_content(y)]


def _plain_sense(toks: list[str], i: int, linked: dict[int, str], vocab: Vocabulary) -> bool:
    """Whether a rule's word that is also a table value ("approved", a claim status; "standard", a service level)
    is used in its plain sense: before "to"/"for" ("approved to carry"), or beside another table's noun or column
    ("an approved carrier", "standard payment terms")."""
    nxt = toks[i + 1] if i + 1 < len(toks) else ""
    if nxt in {"to", "for"}:
        return True
    own = {w for key, texts in vocab.column_values.items() if any(toks[i] in words(v) for v in texts)
           for w in [*map(stem, words(key.replace(".", " "))), *vocab.aliases.get(key.split(".")[0], ())]}  # the
    # value's table (by its name or an alias) and column: claims, status; "a standard consignment" is a shipment's
    return bool(nxt) and (stem(nxt) in vocab.tables or linked.get(i + 1) == "column") and stem(nxt) not in own


def _row_value(after: list[str], vocab: Vocabulary) -> bool:
    """Whether the words after "than the", "after the" are a value the rows hold or compute: a column's words not
    followed by a rule's ("the promised date", "the delivery date"; not "the weight limit"), or an aggregate ("the
    average across all")."""
    return bool(after) and (after[0] in AGGREGATES or vocab.explains(after[0]) and after[0] not in RULE_WORDS
                            and not any(w in RULE_WORDS for w in after[1:]))


def _excluded(toks: list[str]) -> set[int]:
    """Positions of what a question leaves out of its figure: "(before / excluding) (the) fuel
    surcharge" names a charge the answer must not add, not a rule it applies."""
    out: set[int] = set()
    for i, t in enumerate(toks):
        if t in EXCLUDING:
            j = i + 2 if i + 1 < len(toks) and toks[i + 1] in {"the", "any"} else i + 1
            if j + 1 < len(toks) and is_content(toks[j]) and is_content(toks[j + 1]) and toks[j] not in RULE_WORDS:
                out |= {j, j + 1}
    return out
