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
unless it counts or lists rows outright ("how many claims *should* have been escalated"); a count that is the
rule's own figure ("how many delivered shipments does a carrier *need* before ...", "the *minimum number of*
deliveries") asks for the rule too, and "how many *days* after delivery" counts days, not rows. A negated modal
("loads it *shouldn't* have carried") is a modal, and so is "we'd" before a verb ("the most *we'd* pay out on claim
CL0004"; not "the date we'd promised"); "no. of" is "number of".

Why not only the model: on the embedded 1.5B model the SourceRouter signature answers close to one constant route
whatever the question (benchmarks/results/data_route.md). The cues need no model call and say which words decided.
They are English; benchmarks/results/router_cues.md and router_rounds.md measure them on questions written without
seeing them. A word the tables never use ("hauliers" for carriers) links only when the table's sidecar lists it in
``aliases`` (the last word of a longer alias: "haulage firm" links "firms"); an alias is the table's own word too
when a value is read in its plain sense ("a standard consignment" is a shipment's service level, not a rule).
"""

from __future__ import annotations

from dataclasses import dataclass

from rag.data.schemalink.lexicon import QUESTION_START, SENTENCE, YES_NO, polite, stem, words
from rag.data.schemalink.rows import read_rows
from rag.data.schemalink.rules import asks_rule, read_rule
from rag.data.schemalink.vocabulary import Vocabulary


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
    strong, weak = read_rows(toks, stems, starts, nouns, linked, vocab)
    rule = read_rule(toks, linked, vocab)
    if strong:
        return Cues(rows=strong, rule=rule)
    named = sorted(j for j, kind in linked.items() if kind == "name")
    if named and rule and not weak:  # "Is Ironbridge Freight meeting our minimum on-time rate?": a record named
        return Cues(rows=f"names {' '.join(toks[j] for j in named)}", rule=rule)  # and held against a rule
    asks = any(toks[s] in QUESTION_START for s in starts if s)  # "Do key accounts ship more? Compare the ..."
    if weak and not asks_rule(toks) and (toks[0] not in YES_NO or polite(toks, 0) or asks):  # a yes/no question asks whether a
        # rule holds ("are lost shipments counted in the on-time percentage?"); with "any" it counts rows (strong)
        return Cues(rows=weak, rule=rule)
    return Cues(rows=None, rule=rule if weak else None)


def _sentence_starts(question: str, toks: list[str]) -> set[int]:
    starts, seen = {0}, 0
    for part in SENTENCE.split(question)[:-1]:
        seen += len(words(part))
        starts.add(seen)
    for i in list(starts):  # "could you (please) list ...": the request's verb starts it
        if polite(toks, i):
            starts.add(i + 3 if i + 2 < len(toks) and toks[i + 2] == "please" else i + 2)
    return {i for i in starts if i < len(toks)}


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
