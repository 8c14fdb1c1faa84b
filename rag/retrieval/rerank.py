"""An LM reranker: one listwise call orders the top fused candidates, and its order is fused with theirs.

No cross-encoder ships inside a PyPI package, so the reranker that runs offline is the language model itself
(:class:`signatures.Reranker`): the top ``depth`` fused candidates, each cut to ``passage_chars``, go to one call
that lists the passages that answer the question, best first. A small model's list is noisy, so it does not
replace the first-stage order; it is fused with it by RRF (``weight``: the LM list's weight, the fused list's is
1). A passage the LM lists therefore rises above those it leaves out, and one it ranks first rises most; a
candidate below ``depth`` keeps its place behind them.

The predictor is part of the agent's program (``Sieve.reranker``), so ``rag compile`` can optimize it, and the
DSPy cache serves a repeated call. An output that cannot be read costs the reranking, never the question.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import dspy
from dspy.utils.exceptions import AdapterParseError

from rag.usage.metering import CallStats, metered_call
from signatures import Reranker

DEPTH = 10  # fused candidates the LM reads in its one call
PASSAGE_CHARS = 300  # each candidate is cut to its first N characters for the reranker


@dataclass
class Reranking:
    """The LM's order over the candidates it read (indices into them), what it cost, and what went wrong."""

    order: list[int] = field(default_factory=list)
    read: int = 0  # how many candidates the call read
    calls: dict[str, CallStats] = field(default_factory=dict)  # "rerank" -> its LM call
    notes: list[str] = field(default_factory=list)


class LMReranker(dspy.Module):
    """Order ``depth`` candidate passages for a question with one LM call."""

    listwise = True  # what the retriever checks: this reranker orders a list (a cross-encoder scores pairs)

    def __init__(self, depth: int = DEPTH, passage_chars: int = PASSAGE_CHARS, weight: float = 1.0,
                 lm: dspy.BaseLM | None = None) -> None:
        super().__init__()
        for name, value in (("depth", depth), ("passage_chars", passage_chars)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"rerank {name} must be an integer >= 1, got {value!r}")
        self.depth = depth
        self.passage_chars = passage_chars
        self.weight = float(weight)
        self.lm = lm  # None: the configured dspy LM
        self.rank = dspy.Predict(Reranker)

    def forward(self, question: str, passages: Sequence[Any]) -> Reranking:
        """``passages``: objects with ``text`` (and optionally ``title``), best-ranked first."""
        pool = list(passages)[: self.depth]
        out = Reranking(read=len(pool))
        if len(pool) < 2:
            return out
        try:
            pred, stats = metered_call(self.rank, self.lm, question=question, passages=self.format(pool))
        except (AdapterParseError, ValueError) as exc:  # the model wrote something the adapter cannot read
            out.notes.append(f"rerank: skipped, the model's output could not be read ({type(exc).__name__})")
            return out
        out.calls["rerank"] = stats
        out.notes.extend(f"rerank: {note}" for note in stats.notes)
        out.order = clean_order(pred.ranking, len(pool))
        if not out.order:
            out.notes.append("rerank: the model listed no passage it was shown; the fused order stands")
        return out

    def format(self, pool: Sequence[Any]) -> str:
        blocks = []
        for i, hit in enumerate(pool, 1):
            title = getattr(hit, "title", "") or ""
            text = " ".join(str(hit.text).split())
            if len(text) > self.passage_chars:
                cut = text.rfind(" ", 0, self.passage_chars)
                text = text[: cut if cut > self.passage_chars // 2 else self.passage_chars] + " ..."
            blocks.append(f"[{i}] {title}".rstrip() + f"\n{text}")
        return "\n\n".join(blocks)


def clean_order(raw: Any, n: int) -> list[int]:
    """0-based indices from the model's 1-based list: numbers outside 1..n and repeats dropped."""
    items = raw if isinstance(raw, list) else [raw]
    seen: list[int] = []
    for item in items:
        try:
            number = int(str(item).strip().strip("[]#"))
        except ValueError:
            continue
        if 1 <= number <= n and number - 1 not in seen:
            seen.append(number - 1)
    return seen
