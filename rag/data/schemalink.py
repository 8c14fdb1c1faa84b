"""Routing by schema linking: where a question's answer is, read from its wording and the index's own vocabulary.

A question goes to the tables when it asks for something computed from rows of a table it names: a count ("how
many open claims", "claims filed in Q4: how many?"), a total, average or share ("the average weight of express
shipments", "how much have we paid out on claims"), a top few ("which carrier handled the most shipments", "top 3
carriers by ..."), a list ("which customers are key accounts", "are there any open claims", "customers with a
credit limit under 10,000?"),
or a value of a record it names ("the credit limit of Redwood Beverages B.V.", "claim CL0004"; a name said by its
leading words, "Redwood Beverages", with ``short_names``: rag.data.shortnames). Tables are named
by their own words: table and column names, the words a column's description names it with ("Base freight charge in
euros" for ``freight_eur``, up to its first comma or bracket; not a true/false column's, whose description is its
condition), an id column's everyday name ("shipment number"), the values of their text columns (a city, a status, a
customer), and the shape of their ids (``CL0004``), all read from the database.

Such a question goes to ``both`` when it also applies a rule that only the documents state:

- it compares the rows with a threshold it names but does not give ("more than *the* standard cap", "heavy
  *enough*", "*too* small"), where "after *their* promised date", "after the promised date" (a column's words) or
  "after 1 July" is a value the rows hold;
- it uses the words of a rule (policy, limit, deadline, target, approval, qualify, must, may, can, should, had to,
  "in time"), where "can you", "could you" and "can I get" are requests and "break down" a grouping;
- it uses a term of the documents that the tables do not say: two words in a row ("fuel surcharge", "severe
  delay", a hyphenated "severe-delay" by its parts) found together in a document passage, unless the tables put
  them together too (a column's name or naming clause, a value beside its column: "gold tier") or one is a table's
  noun ("shipments handled"); "freight credit" joins words of two columns and stays the documents'. A term the
  question leaves out ("before / excluding the fuel surcharge") applies no rule; or
- a rule's word that is also a table value is used in its plain sense ("a carrier not *approved* to carry it",
  "the *standard* payment terms": not the claim status or the service level).

A question that names a customer or carrier and holds it against a rule ("Is Ironbridge Freight meeting our
minimum on-time rate?") goes to ``both`` though it counts nothing.

Every other question goes to the documents. A question whose main verb is a rule ("what is the heaviest a
shipment is *allowed to* be", "what rate does a carrier *have to* stay above") asks for the rule, not for rows,
unless it counts or lists rows outright ("how many claims *should* have been escalated").

Why not only the model: on the embedded 1.5B model the SourceRouter signature answers close to one constant route
whatever the question (benchmarks/results/data_route.md). The cues need no model call and say which words decided.
They are English; benchmarks/results/router_cues.md and router_rounds.md measure them on questions written without
seeing them. A word the tables never use ("hauliers" for carriers) links only when the table's sidecar lists it in
``aliases`` (the last word of a longer alias: "haulage firm" links "firms").
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

WORD = re.compile(r"[a-z0-9]+(?:['.-][a-z0-9]+)*")
SENTENCE = re.compile(r"[.?!;:,]\s+|\s+[-\u2013\u2014]\s+")  # sentences and clauses: "In Q4, which carriers ..."
VALUE_CHARS = 40  # longer text values (notes, descriptions) are not names a question repeats
VALUES_PER_COLUMN = 500  # a column with more distinct values (an id, free text) gives no values to link
VALUES_SECONDS = 1.0  # per column: a large table's column that takes longer gives no values
VALUES_BUDGET_S = 5.0  # all columns together: the agent starts in bounded time over any tables
NAMES_FROM = 10  # distinct values from which a column's values are names (customers, cities), not categories
DOC_CHUNKS = 50_000  # passages read for the documents' two-word terms; a larger corpus's later chunks are not
COMMON_TERM = 0.3  # a term in more of the passages than this share is the corpus's name for itself ("Kestrel
# Freight"), not a term of one rule
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
                "lightest", "longest", "shortest", "top", "best", "worst", "latest", "earliest", "oldest", "newest"}
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
ID_NOUNS = {"number", "no", "ref", "reference", "code"}  # what people call an id column: "the shipment number"
PHRASAL = {("break", "down"), ("broken", "down"), ("breaks", "down"), ("break", "out")}  # "break (the claims) down
# by Y", the particle up to four words on: a grouping, not a broken rule
EXCLUDING = {"before", "excluding", "ex"}  # "before fuel surcharge": a charge left out of a figure
PREPOSITIONS = {"on", "in", "for", "from", "across", "over", "of"}
MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"}


def _naming_clause(description: str | None) -> str:
    """What a column's description calls it, before any comma, bracket, colon or semicolon: "Base freight charge
    in euros, before the fuel surcharge." -> "Base freight charge in euros" (the surcharge is another thing)."""
    return re.split(r"[,;:(]|\.\s|\.$", str(description or ""), maxsplit=1)[0]


def _quoted(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


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


def _adjacent(toks: list[str]) -> set[tuple[str, str]]:
    return {(root(a), root(b)) for a, b in zip(toks, toks[1:])}


def _content(word: str) -> bool:
    return word not in STOP and not word.isdigit() and word not in MONTHS and len(word) > 1


def terms(text: str) -> set[tuple[str, str]]:
    """The two-word terms of ``text``: adjacent content words, by root; a hyphenated word also as its parts
    ("severe-delay credit" has "severe delay" and "delay credit")."""
    found: set[tuple[str, str]] = set()
    for toks in (words(text), words(text.replace("-", " "))):
        found |= {(root(a), root(b)) for a, b in zip(toks, toks[1:]) if _content(a) and _content(b)}
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
            vocab.tables |= {stem(words(a)[-1]) for a in table.get("aliases") or [] if words(a)}  # "haulage firm": firm
            for col in table.get("columns", []):
                parts = [stem(w) for w in words(col["name"]) if w not in UNITS]
                kind = str(col.get("type", "")).upper()
                vocab.columns |= set(parts) | ({"date"} if "DATE" in kind or "TIMESTAMP" in kind else set())
                if len(parts) > 1:
                    vocab.column_phrases.add(tuple(parts))
                if len(parts) == 1 and words(col["name"])[-1:] == ["id"]:  # shipment_id: "shipment number", "claim no"
                    vocab.column_phrases |= {(parts[0], w) for w in ID_NOUNS}
                naming = words(_naming_clause(col.get("description")))
                if "BOOL" not in kind:  # a flag's description is its condition, often a rule's own term
                    vocab.described |= {root(w) for w in naming if _content(w)}
                    vocab.pairs |= _adjacent(naming)
                vocab.pairs |= _adjacent(words(col["name"]))
                if "DATE" in kind or "TIMESTAMP" in kind:  # "promised date", "collection date" for promised_on
                    vocab.pairs |= {(root(w), "date") for w in words(col["name"]) + naming if _content(w)}
                for text in (values or {}).get(f'{table["name"]}.{col["name"]}', ()):  # "gold tier", "express
                    vocab.pairs |= _adjacent(words(text))  # service", "status open": a value beside its column
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


@dataclass
class Cues:
    """What the wording of one question says, and the route it leads to (with the words that decided it)."""

    rows: str | None  # why the question asks for rows of a table, or None
    rule: str | None  # why it applies something the documents state, or None

    @property
    def route(self) -> str:
        return ("both" if self.rule else "data") if self.rows else "docs"

    @property
    def reason(self) -> str:
        if not self.rows:
            return "asks for nothing computed from rows of a table" + (f" ({self.rule})" if self.rule else "")
        return f"{self.rows}; " + (self.rule or "nothing it needs from the documents")


def read_cues(question: str, vocab: Vocabulary) -> Cues:
    """The route of ``question`` by its wording (see the module's docstring), with the words that decided it."""
    toks = words(question)
    stems = [stem(t) for t in toks]
    starts = _sentence_starts(question, toks)
    linked = _linked(toks, stems, vocab)
    for start, end, _, _ in vocab.short.spans(question) if vocab.short is not None else ():  # "Birch Foods", and
        if not any(linked.get(j) == "name" for j in range(start, end)):  # "Alder Chemicals" over the segment's value
            linked.update({j: "name" for j in range(start, end)})
    nouns = {i for i, s in enumerate(stems) if s in vocab.tables or s in vocab.columns}
    strong, weak = _rows(toks, stems, starts, nouns, linked, vocab)
    rule = _rule(toks, linked, vocab)
    if strong:
        return Cues(rows=strong, rule=rule)
    named = sorted(j for j, kind in linked.items() if kind == "name")
    if named and rule and not weak:  # "Is Ironbridge Freight meeting our minimum on-time rate?": a record named
        return Cues(rows=f"names {' '.join(toks[j] for j in named)}", rule=rule)  # and held against a rule
    asks = any(toks[s] in QUESTION_START for s in starts if s)  # "Do key accounts ship more? Compare the ..."
    if weak and not _asks_rule(toks) and (toks[0] not in YES_NO or _polite(toks, 0) or asks):  # a yes/no question asks whether a
        # rule holds ("are lost shipments counted in the on-time percentage?"); with "any" it counts rows (strong)
        return Cues(rows=weak, rule=rule)
    return Cues(rows=None, rule=rule if weak else None)


def _sentence_starts(question: str, toks: list[str]) -> set[int]:
    starts, seen = {0}, 0
    for part in SENTENCE.split(question)[:-1]:
        seen += len(words(part))
        starts.add(seen)
    for i in list(starts):  # "could you (please) list ...": the request's verb starts it
        if _polite(toks, i):
            starts.add(i + 3 if i + 2 < len(toks) and toks[i + 2] == "please" else i + 2)
    return {i for i in starts if i < len(toks)}


def _polite(toks: list[str], i: int) -> bool:
    """'can you', 'could you', 'would you', 'can I get': a request, not a rule (a modal the question's verb is)."""
    return i + 1 < len(toks) and toks[i] in {"can", "could", "would", "will"} and (
        toks[i + 1] == "you" or toks[i + 1] in {"i", "we"} and i + 2 < len(toks) and toks[i + 2] in {"get", "have", "see"})


def _linked(toks: list[str], stems: list[str], vocab: Vocabulary) -> dict[int, str]:
    """Positions covered by a table value or a column's words ("credit limit"): those words are the tables'."""
    found: dict[int, str] = {}
    for phrases, kind, seq in ((vocab.names, "name", toks), (vocab.values, "value", toks),
                               (vocab.column_phrases, "column", stems)):
        for n in range(min(6, len(seq)), 0, -1):
            for i in range(len(seq) - n + 1):
                if tuple(seq[i:i + n]) in phrases and not any(j in found for j in range(i, i + n)):
                    found.update({j: kind for j in range(i, i + n)})
    return found


def _rows(toks: list[str], stems: list[str], starts: set[int], nouns: set[int], linked: dict[int, str],
          vocab: Vocabulary) -> tuple[str | None, str | None]:
    """(a strong reason: counts or lists rows outright; a weak one: an aggregate, a top few or a record's value)."""
    count = None  # a weak count, kept while a strong reason may still come
    table = lambda j: stems[j] in vocab.tables  # noqa: E731
    plural = lambda j: table(j) and toks[j] != stems[j] and toks[j - 1] not in {"a", "an"}  # noqa: E731 "a claims
    # handler": a plural after "a" is a noun's modifier
    for i in range(len(toks) - 1):
        if toks[i] == "how" and toks[i + 1] in {"many", "much"}:  # the counted words end at the verb:
            span = range(i + 2, min(len(toks), i + 6))  # "how many days must a customer ..." counts days
            end = next((j for j in span if toks[j] in VERBS or toks[j] in MODALS), span.stop)
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
        if toks[i] in TALLIES and toks[i + 1] == "of" and any(j in nouns for j in range(i + 2, i + 6)):
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
            j = next((j for j in range(i + 1, min(len(toks), i + 5)) if table(j) or j in nouns and toks[j] != stems[j]),
                     None)
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
    agg = next((t for t in toks if t in AGGREGATES), None)
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
    if heads and (sup or not any(t in VERBS | MODALS for t in toks)):  # limit under 10,000?", "carrier with the
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


def _asks_rule(toks: list[str]) -> bool:
    """Whether the question's verb is a rule: "what is the heaviest X is allowed to be", "must a Y ...": a modal, or
    "have to"/"allowed to", in a question that neither counts nor lists rows outright (those apply the rule)."""
    return any(t in MODALS | {"can"} and not _month_may(toks, k) and not _polite(toks, k) for k, t in enumerate(toks)) or \
        any(pair in QUASI for pair in zip(toks, toks[1:]))


def _rule(toks: list[str], linked: dict[int, str], vocab: Vocabulary) -> str | None:
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
        if t in RULE_WORDS or t in IMPLICIT or t in MODALS | {"can"} and not _month_may(toks, i) and not _polite(toks, i):
            return f"names a rule ('{t}')"
        if i + 1 < len(toks) and (t, toks[i + 1]) in QUASI:
            return f"names a rule ('{t} {toks[i + 1]}')"
        if i + 1 < len(toks) and (t, toks[i + 1]) in {("in", "time")}:  # "filed in time": before a deadline
            return f"compares with a deadline it does not give ('{t} {toks[i + 1]}')"
    for a in range(len(toks) - 1):
        b = a + 1
        if a in linked and b in linked or not (_content(toks[a]) and _content(toks[b])) or a in excluded:
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
    return [(a, b)] + [(x, y) for x, y in zip(parts, parts[1:]) if _content(x) and _content(y)]


def _plain_sense(toks: list[str], i: int, linked: dict[int, str], vocab: Vocabulary) -> bool:
    """Whether a rule's word that is also a table value ("approved", a claim status; "standard", a service level)
    is used in its plain sense: before "to"/"for" ("approved to carry"), or beside another table's noun or column
    ("an approved carrier", "standard payment terms")."""
    nxt = toks[i + 1] if i + 1 < len(toks) else ""
    if nxt in {"to", "for"}:
        return True
    own = {w for key, texts in vocab.column_values.items() if any(toks[i] in words(v) for v in texts)
           for w in map(stem, words(key.replace(".", " ")))}  # the value's table and column: claims, status
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
            if j + 1 < len(toks) and _content(toks[j]) and _content(toks[j + 1]) and toks[j] not in RULE_WORDS:
                out |= {j, j + 1}
    return out


def _month_may(toks: list[str], i: int) -> bool:
    """'in May 2024': the month, not the modal."""
    return toks[i] == "may" and (i > 0 and toks[i - 1] in {"in", "of", "since", "until", "during"} | MONTHS
                                 or i + 1 < len(toks) and (toks[i + 1].isdigit() or toks[i + 1] in MONTHS))


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
