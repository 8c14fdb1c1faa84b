"""The English words the cue router reads, and how it cuts text into them: lower-case words, a rough singular
(``stem``), a cruder root for matching terms (``root``), two-word terms, value and id shapes, and the small word
lists each rule reads (rag.data.schemalink.cues)."""

from __future__ import annotations

import re
from typing import Any

WORD = re.compile(r"[a-z0-9]+(?:['.-][a-z0-9]+)*")
SENTENCE = re.compile(r"[.?!;:,]\s+|\s+[-\u2013\u2014]\s+")  # sentences and clauses: "In Q4, which carriers ..."
UNITS = {"id", "eur", "usd", "gbp", "kg", "km", "days", "day", "pct", "at", "on", "is", "has", "no", "num", "of"}
STOP = set("""a an the of in on at to for from by with without about as into onto over under than then and or
nor but if so that this these those there their its it they them we our us you your he she his her i my me be is
are was were been being do does did doing have has had having what which who whom whose when where why how much
many any all each every some no not only also still already just more most less least very too enough per can
could would will shall should must may might after before above below between across within during since until
against along among around behind beyond through toward towards upon via once""".split())
AGGREGATES = {"total", "sum", "average", "avg", "mean", "median", "percentage", "percent", "share", "proportion",
              "ratio", "number"}
SUPERLATIVES = {"most", "least", "highest", "lowest", "largest", "smallest", "fewest", "biggest", "heaviest",
                "lightest", "longest", "shortest", "top", "best", "worst", "latest", "earliest", "oldest", "newest",
                "busiest", "cheapest", "costliest", "priciest", "fastest", "slowest", "quickest", "greatest"}
RULE_WORDS = {"policy", "policies", "rule", "rules", "limit", "limits", "cap", "caps", "deadline", "deadlines",
              "threshold", "thresholds", "standard", "minimum", "maximum", "allowed", "permitted", "required",
              "requires", "require", "requirement", "approval", "approve", "approved", "sign-off", "signoff", "sla",
              "breach", "break", "breaks", "broke", "violate", "violates", "violated", "escalate", "escalated",
              "escalation", "entitled", "owe", "owed", "owes", "eligible", "qualify", "qualifies", "qualified",
              "exception", "exceptions", "retention", "probation", "penalty", "according", "need", "needs",
              "needed", "liable", "liability", "target", "targets", "allow", "allows", "cleared", "due", "definition",
              "review", "compliance", "breaches", "window"}
TALLIES = {"number", "count", "breakdown", "list", "tally", "split"}  # "a breakdown of claims by status"
REQUESTS = {"i", "we", "you"}  # "I need a count of ...": a request, not a rule
MODALS = {"must", "may", "should", "shall", "ought", "could", "would"}
CONTRACTED = {"shouldn't", "shouldnt", "should've", "shouldve", "mustn't", "mustnt", "can't", "cant", "cannot",
              "couldn't", "couldnt", "wouldn't", "wouldnt", "shouldn", "mustn", "couldn", "wouldn"}  # "loads it
# shouldn't have carried" (a curly apostrophe: "shouldn", "t"): a modal all the same
MODAL_WORDS = MODALS | CONTRACTED | {"can"}  # every word that can be a question's modal verb
PARTICIPLES = {"had", "paid", "made", "done", "sent", "got", "gone", "seen", "told", "sold", "held", "kept", "set"}
WOULD = {"we'd", "you'd", "they'd", "i'd", "it'd"}  # "the most we'd pay out": applies a rule (not "the date we'd
# promised", a past participle: had)
QUASI = {("have", "to"), ("has", "to"), ("had", "to"), ("allowed", "to"), ("need", "to"), ("needs", "to"),
         ("sign", "off"), ("signed", "off")}
IMPLICIT = {"enough", "too"}  # "heavy enough", "too small": a threshold the question leans on without giving it
COMPARE = {"than", "above", "below", "over", "under", "exceed", "exceeds", "exceeded", "exceeding", "beyond",
           "outside", "after", "before"}
THRESHOLD = {"the", "a", "an", "our", "your", "what"}  # "more than the cap", "exceed what we owe"; "their", "its":
# a value of the row itself
QUESTION_START = {"what", "whats", "which", "who", "list", "show", "name", "give", "find", "check", "compare", "rank", "sort",
                  "count", "pull", "get", "tally", "flag"}  # not "do
# shipments count ...?": a yes/no question asks about rows only with a quantifier ("are any claims ...")
QUANTIFIERS = {"any", "all", "every", "each"}
VERBS = {"is", "are", "was", "were", "be", "do", "does", "did", "has", "have", "had", "can", "will"}
YES_NO = VERBS | {"could", "would", "should", "must", "may", "shall"}  # "are shipments in transit counted ...?"
PHRASAL = {("break", "down"), ("broken", "down"), ("breaks", "down"), ("break", "out")}  # "break (the claims) down
# by Y", the particle up to four words on: a grouping, not a broken rule
EXCLUDING = {"before", "excluding", "ex"}  # "before fuel surcharge": a charge left out of a figure
NEEDS = {"need", "needs", "require", "requires"}  # "how many X does a Y need": asks for the rule's figure
DURATIONS = {"day", "days", "week", "weeks", "hour", "hours", "month", "months", "year", "years"}  # "how many days
# after delivery ...": a length of time is counted, not the rows named after it
BOUNDS = {"minimum", "maximum", "min", "max"}  # "the minimum number of ...": a rule's figure, not a tally
PREPOSITIONS = {"on", "in", "for", "from", "across", "over", "of"}
MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"}


def naming_clause(description: str | None) -> str:
    """What a column's description calls it, before any comma, bracket, colon or semicolon: "Base freight charge
    in euros, before the fuel surcharge." -> "Base freight charge in euros" (the surcharge is another thing)."""
    return re.split(r"[,;:(]|\.\s|\.$", str(description or ""), maxsplit=1)[0]


def words(text: str, *, cased: bool = False) -> list[str]:
    """Lower-case words; "_" splits (column names), a possessive "'s" goes (the policy's -> policy). ``cased``: the
    same words as written ("Bluefin"), for a reader that needs the case."""
    if cased:
        return re.findall(WORD.pattern, re.sub(r"['\u2019][sS]\b", "", str(text).replace("_", " ")), re.IGNORECASE)
    return WORD.findall(re.sub(r"['\u2019]s\b", "", str(text).lower().replace("_", " ")))


def table_keys(record: dict[str, Any]) -> dict[str, str]:
    """Per table of a tables record, its key: its first column, when that is named ``...id`` (customer_id)."""
    return {t["name"]: key for t in record.get("tables") or []
            if (key := key_of([c["name"] for c in t.get("columns") or []]))}


def key_of(columns: list[str]) -> str | None:
    """A table's key from its columns in order: the first, when it is named ``...id``; None otherwise."""
    return columns[0] if columns and columns[0].lower().endswith("id") else None


def stem(word: str) -> str:
    """A plural's singular, roughly (claims -> claim, categories -> category); enough to match table names."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def root(word: str) -> str:
    """A cruder stem for matching terms (severely delayed ~ severe delay): the same on both sides, not a lemma."""
    for suffix in ("ly", "ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def adjacent(toks: list[str]) -> set[tuple[str, str]]:
    return {(root(a), root(b)) for a, b in zip(toks, toks[1:])}


def is_content(word: str) -> bool:
    return word not in STOP and not word.isdigit() and word not in MONTHS and len(word) > 1


def terms(text: str) -> set[tuple[str, str]]:
    """The two-word terms of ``text``: adjacent content words, by root; a hyphenated word also as its parts
    ("severe-delay credit" has "severe delay" and "delay credit")."""
    found: set[tuple[str, str]] = set()
    for toks in (words(text), words(text.replace("-", " "))):
        found |= {(root(a), root(b)) for a, b in zip(toks, toks[1:]) if is_content(a) and is_content(b)}
    return found


def value_words(text: str) -> tuple[str, ...]:
    """A text value as the words a question would name it by; () for one that names nothing (a number, a flag)."""
    toks = tuple(words(text))
    return toks if toks and not all(t.isdigit() for t in toks) and toks not in {("true",), ("false",)} else ()


def id_shape(value: str) -> str | None:
    """``CL0004`` -> ``cl9999``-like shape (letters kept, digits as 9), for values that mix letters and digits."""
    v = str(value).strip().lower()
    if re.fullmatch(r"[a-z]{1,4}-?\d{2,}", v):
        return re.sub(r"\d", "9", v)
    return None


def polite(toks: list[str], i: int) -> bool:
    """'can you', 'could you', 'would you', 'can I get', 'I'd like': a request, not a rule (a modal the question's
    verb is)."""
    return i + 1 < len(toks) and (toks[i] in {"can", "could", "would", "will"} and (
        toks[i + 1] == "you" or toks[i + 1] in {"i", "we"} and i + 2 < len(toks) and toks[i + 2] in {"get", "have", "see"})
        or toks[i] in {"would", "i'd", "we'd"} and toks[i + 1] in {"like", "love"})


def month_may(toks: list[str], i: int) -> bool:
    """'in May 2024': the month, not the modal."""
    return toks[i] == "may" and (i > 0 and toks[i - 1] in {"in", "of", "since", "until", "during"} | MONTHS
                                 or i + 1 < len(toks) and (toks[i + 1].isdigit() or toks[i + 1] in MONTHS))


def modal(toks: list[str], i: int) -> bool:
    """Whether ``toks[i]`` is a modal the question uses as one: not "May" the month, not a request ("could you")."""
    return toks[i] in MODAL_WORDS and not month_may(toks, i) and not polite(toks, i)


def would(toks: list[str], i: int) -> bool:
    """Whether ``toks[i]`` is "we'd" and the like meaning *would* ("we'd pay"), not *had* ("we'd promised", "we'd
    been") and not a request ("I'd like")."""
    nxt = toks[i + 1] if i + 1 < len(toks) else ""
    return toks[i] in WOULD and not nxt.endswith(("ed", "en")) and nxt not in PARTICIPLES and not polite(toks, i)
