"""Whether a question asks for rows of a table: a count, a total, a top few, a list, or a record's value; read from
its words against the vocabulary (rag.data.schemalink.cues)."""

from __future__ import annotations

from rag.data.schemalink.lexicon import (
    AGGREGATES,
    BOUNDS,
    DURATIONS,
    MODAL_WORDS,
    NEEDS,
    PREPOSITIONS,
    QUANTIFIERS,
    QUESTION_START,
    SUPERLATIVES,
    TALLIES,
    VERBS,
    id_shape,
)
from rag.data.schemalink.vocabulary import Vocabulary

VERB_LIKE = VERBS | MODAL_WORDS  # verbs and modals: where a count's words end; what a noun phrase lacks


def read_rows(toks: list[str], stems: list[str], starts: set[int], nouns: set[int], linked: dict[int, str],
              vocab: Vocabulary) -> tuple[str | None, str | None]:
    """(a strong reason: counts or lists rows outright; a weak one: an aggregate, a top few or a record's value)."""
    count = None  # a weak count, kept while a strong reason may still come
    table = lambda j: stems[j] in vocab.tables  # noqa: E731
    plural = lambda j: table(j) and toks[j] != stems[j] and toks[j - 1] not in {"a", "an"}  # noqa: E731 "a claims
    # handler": a plural after "a" is a noun's modifier
    for i in range(len(toks) - 1):
        if toks[i] == "how" and toks[i + 1] in {"many", "much"}:  # the counted words end at the verb:
            span = range(i + 2, min(len(toks), i + 6))  # "how many days must a customer ..." counts days
            end = next((j for j in span if toks[j] in VERB_LIKE), span.stop)
            unit = next((j for j in (i + 2, i + 3) if j < len(toks) and toks[j] in DURATIONS), None)
            if unit is not None and (unit == i + 2 or toks[i + 2] in {"working", "business", "calendar"}):
                end = min(end, unit + 1)  # "how many days after delivery ...": counts days, not the deliveries
            if end < len(toks) and toks[end] in {"does", "do"} and NEEDS & set(toks[end + 1:end + 5]):
                continue  # "how many delivered shipments does a carrier need before ...": a rule's own figure
            hit = next((j for j in range(i + 2, end) if table(j)), next((j for j in range(i + 2, end) if j in nouns), None))
            if hit is None and (end == i + 2 or i + 2 in starts):  # "of the paid claims, how many were ...",
                hit = next((j for j in range(i - 1, -1, -1) if table(j)), None)  # "claims in Q4: how many, and"
            if hit is not None and table(hit):
                return f"asks how {toks[i + 1]} ({toks[hit]})", None
            if hit is not None:  # a column's word ("how many levels"): weak, a rule question may say it too
                return None, f"asks how {toks[i + 1]} ({toks[hit]})"
            clause = next((s for s in sorted(starts) if s > i), len(toks))  # "how much have we paid out on claims":
            later = next((j for j in range(end, clause) if plural(j) and toks[i + 1] == "much"  # what is summed
                          and any(t in PREPOSITIONS for t in toks[j - 2:j])), None)  # follows a preposition;
            counted = next((j for j in range(i + 2, end) if linked.get(j) == "value"), None)  # "how many express
            if count is None and (later is not None or counted is not None):  # bookings": a value counted
                count = f"asks how {toks[i + 1]} ({toks[later if later is not None else counted]})"
        if (toks[i] in TALLIES or toks[i] == "no") and toks[i + 1] == "of" and any(j in nouns for j in range(i + 2, i + 6)) \
                and not (i and toks[i - 1] in BOUNDS):  # "the minimum number of delivered shipments before a
            # carrier gets a rate": a rule's own figure
            return f"asks for the {toks[i]} of {toks[i + 2]}", None
        if toks[i + 1] in TALLIES and i + 2 == len(toks) and i + 1 in starts and any(map(table, range(i + 1))):  # "... - count?"
            return f"asks for a {toks[i + 1]}", None
        if toks[i + 1] == "counts" and table(i):  # "monthly shipment counts" ("do lost shipments count": a verb)
            return f"asks for {toks[i]} {toks[i + 1]}", None
    for i in starts:
        if toks[i] in QUESTION_START and any(plural(j) for j in range(i + 1, min(len(toks), i + 5))):
            j = next(j for j in range(i + 1, min(len(toks), i + 5)) if plural(j))
            return f"asks which {toks[j]}", None
    for i, t in enumerate(toks):
        if t in QUANTIFIERS:  # "any claims", "all express shipments", "any key accounts" (a column's plural)
            # a singular only right after the quantifier, its values or a date ("any open claim", "every Q1
            # shipment"; not "any compensation if their delivery")
            j = next((j for j in range(i + 1, min(len(toks), i + 5)) if (table(j) or j in nouns) and (
                toks[j] != stems[j] or table(j) and _between(toks, linked, nouns, i, j))), None)
            if j is not None:
                return f"asks about {t} {toks[j]}", None
    record = next((t for t in toks if id_shape(t) in vocab.ids), None)
    if record:
        return f"names the record {record.upper()}", None
    named = [i for i, kind in linked.items() if kind == "name"]
    others = [i for i in nouns | {i for i, kind in linked.items() if kind != "name"} if i not in named]
    if named and (others or len(_runs(named)) > 1):  # "did Kite Foods ship to Copenhagen", "Granite's credit line"
        return f"names {' '.join(toks[i] for i in sorted(named))}", None
    if count:
        return None, count
    if not nouns:
        return None, None
    agg = next((t for k, t in enumerate(toks) if t in AGGREGATES
               and not (t == "number" and k and toks[k - 1] in BOUNDS)  # "the minimum number of": a rule's figure
               and not (t == "mean" and k and toks[k - 1] in {"that", "this", "it", "does", "do", "to"})), None)  # a verb
    if agg:
        return None, f"asks for a {agg} over {toks[min(nouns)]}"
    for i, t in enumerate(toks[:-1]):
        if t in {"per", "each", "by"} and (i + 1 in nouns or toks[i + 1] in {"month", "year", "quarter", "week"}):
            return None, f"asks per {toks[i + 1]}"
    sup = next((t for t in toks if t in SUPERLATIVES), None)
    if sup and (any(t in QUESTION_START for t in toks[:3]) or any(toks[s] in QUESTION_START for s in starts)
                or any(t in SUPERLATIVES for s in starts for t in toks[s:s + 2])):  # "in which month were the most
        # claims filed", "top 3 carriers by ...", "biggest single claim? which customer"
        return None, f"asks for the {sup} {toks[min(nouns)]}"
    heads = [j for s in starts for j in range(s, min(len(toks), s + 2)) if table(j)]  # "Customers with a credit
    if heads and (sup or not any(t in VERB_LIKE for t in toks)):  # limit under 10,000?", "carrier with the
        return None, f"asks for the {toks[heads[0]]}"  # lowest average claim amount?": a noun phrase asks for rows
    for i in starts:  # "which key accounts ...": a column's plural, weak (a rule question may say it too)
        j = next((j for j in range(i + 1, min(len(toks), i + 4)) if j in nouns and toks[j] != stems[j]), None)
        if toks[i] in QUESTION_START and j is not None:
            return None, f"asks which {toks[j]}"
    return None, None


def _runs(positions: list[int]) -> list[list[int]]:
    """Consecutive positions grouped: two runs are two names."""
    runs: list[list[int]] = []
    for p in sorted(positions):
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def _between(toks: list[str], linked: dict[int, str], nouns: set[int], i: int, j: int) -> bool:
    """Whether every word between ``i`` and ``j`` is one of the tables' values or columns' words, or has a digit (a
    date): "every gold tier carrier", "any Q1 shipment"."""
    return all(k in linked or k in nouns or any(map(str.isdigit, toks[k])) for k in range(i + 1, j))
