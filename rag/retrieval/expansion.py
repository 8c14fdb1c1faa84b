"""Query stages that run before the search: multi-query expansion and HyDE, as one DSPy module.

A question is searched in the asker's words; the passage that answers it may use others ("reassign a variable of
the enclosing function" vs ``nonlocal``). :class:`QueryExpander` asks an LM for ``n_queries`` rephrasings in the
documentation's vocabulary (:class:`signatures.Expander`) and, with ``hyde``, for a short hypothetical passage
(:class:`signatures.HypotheticalPassage`) whose embedding is searched as one more list. The retriever fuses every
list with the original's by RRF (:meth:`rag.retrieval.retriever.Retriever.retrieve`); the hypothetical passage is
never shown to the grader or the answerer.

Both predictors are parts of the agent's program, so ``rag compile`` can optimize them and the DSPy cache serves a
repeated question. An LM output that cannot be parsed costs the expansion, never the question: the stage is
skipped with a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from rag.usage.metering import CallStats, metered_call
from signatures import Expander, HypotheticalPassage

_WORD = re.compile(r"\w+")
MAX_EXPANSION_CHARS = 300  # a longer "query" is a paragraph the model wrote by mistake: cut at a word boundary
MAX_PASSAGE_CHARS = 1200  # a hypothetical passage longer than a chunk is cut before it is embedded


@dataclass
class Expansion:
    """What the query stages wrote for one question, and what it cost."""

    queries: list[str] = field(default_factory=list)  # alternative phrasings (never the question itself)
    passage: str | None = None  # the HyDE passage, searched by embedding only
    calls: dict[str, CallStats] = field(default_factory=dict)  # stage ("expand", "hyde") -> its LM call
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.queries and not self.passage


class QueryExpander(dspy.Module):
    """``n_queries`` rephrasings (0 = off) and, with ``hyde``, a hypothetical passage for a question."""

    def __init__(self, n_queries: int = 3, hyde: bool = False, lm: dspy.BaseLM | None = None) -> None:
        super().__init__()
        if not isinstance(n_queries, int) or n_queries < 0:
            raise ValueError(f"n_queries must be an integer >= 0, got {n_queries!r}")
        self.n_queries = n_queries
        self.use_hyde = bool(hyde)
        self.lm = lm  # None: the configured dspy LM
        self.expand = dspy.Predict(Expander)
        self.hyde = dspy.Predict(HypotheticalPassage)

    @property
    def active(self) -> bool:
        return self.n_queries > 0 or self.use_hyde

    def forward(self, question: str) -> Expansion:
        out = Expansion()
        if self.n_queries:
            pred = self._run("expand", out, self.expand, question=question, n=self.n_queries)
            if pred is not None:
                out.queries = clean_queries(pred.queries, question, self.n_queries)
                if not out.queries:
                    out.notes.append("expand: the model wrote no usable query")
        if self.use_hyde:
            pred = self._run("hyde", out, self.hyde, question=question)
            passage = " ".join(str(getattr(pred, "passage", "") or "").split()) if pred is not None else ""
            out.passage = _cut(passage, MAX_PASSAGE_CHARS) or None
        return out

    def _run(self, stage: str, out: Expansion, predictor: dspy.Module, **inputs: Any) -> Any:
        try:
            pred, stats = metered_call(predictor, self.lm, **inputs)
        except (AdapterParseError, ValueError) as exc:  # the model wrote something the adapter cannot read
            out.notes.append(f"{stage}: skipped, the model's output could not be read ({type(exc).__name__})")
            return None
        out.calls[stage] = stats
        out.notes.extend(f"{stage}: {note}" for note in stats.notes)
        return pred


def clean_queries(raw: Any, question: str, n: int) -> list[str]:
    """At most ``n`` non-empty queries, each bringing a word the question and the queries before it lack (a small
    model often repeats one query cut shorter and shorter, which would only weigh the same list twice)."""
    items = raw if isinstance(raw, list) else [raw] if isinstance(raw, str) else []
    seen, out = [set(_WORD.findall(question.lower()))], []
    for item in items:
        text = _cut(" ".join(str(item or "").split()).strip(" -*\"'"), MAX_EXPANSION_CHARS)
        words = set(_WORD.findall(text.lower()))
        if words and not any(words <= before for before in seen):
            seen.append(words)
            out.append(text)
        if len(out) == n:
            break
    return out


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit]
