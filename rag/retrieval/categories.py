"""A category pre-filter: the LM picks up to two of the index's categories and only their passages are searched.

Aegis's policies sit in folders (``travel``, ``security``, ...) that rag index records as each chunk's
``category``; a question about hotel rates need not compete with the password policy. :class:`CategoryRouter`
shows the model the categories *present in the index* (:class:`signatures.CategoryChooser`) and keeps only its
choices that are among them. The retriever then searches those categories and falls back to the whole index, with
a note, when the model chose none, chose only names that are not categories, or the filter leaves too few
passages to fill the hits. An explicit ``--where`` always wins: the router runs only for searches without one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from rag.usage.metering import CallStats, metered_call
from signatures import CategoryChooser

MAX_CHOSEN = 2  # categories searched at most: more would be no filter


@dataclass
class Routing:
    """The categories chosen for one question, what the call cost, and what went wrong."""

    chosen: list[str] = field(default_factory=list)
    calls: dict[str, CallStats] = field(default_factory=dict)  # "route" -> its LM call
    notes: list[str] = field(default_factory=list)


class CategoryRouter(dspy.Module):
    """Up to ``MAX_CHOSEN`` of ``categories`` for a question, in one LM call."""

    def __init__(self, lm: dspy.BaseLM | None = None) -> None:
        super().__init__()
        self.lm = lm  # None: the configured dspy LM
        self.choose = dspy.Predict(CategoryChooser)

    def forward(self, question: str, categories: list[str]) -> Routing:
        out = Routing()
        if len(categories) < 2:
            return out  # nothing to choose between
        try:
            pred, stats = metered_call(self.choose, self.lm, question=question, categories=list(categories))
        except (AdapterParseError, ValueError) as exc:
            out.notes.append(f"route: skipped, the model's output could not be read ({type(exc).__name__})")
            return out
        out.calls["route"] = stats
        out.chosen = clean_choices(pred.chosen, categories)
        if not out.chosen:
            out.notes.append("route: the model chose no category the index has; the whole index is searched")
        return out


def clean_choices(raw: Any, categories: list[str]) -> list[str]:
    """The model's choices that name a category of the index (case and spacing aside), at most ``MAX_CHOSEN``."""
    by_norm = {" ".join(c.split()).lower(): c for c in categories}
    items = raw if isinstance(raw, list) else [raw] if isinstance(raw, str) else []
    out: list[str] = []
    for item in items:
        name = by_norm.get(" ".join(str(item or "").split()).lower().strip("\"' "))
        if name and name not in out:
            out.append(name)
        if len(out) == MAX_CHOSEN:
            break
    return out


def index_categories(index: Any) -> list[str]:
    """The distinct ``category`` values of the index's chunks, sorted."""
    return sorted({str(c.meta["category"]) for c in index.chunks if c.meta.get("category") not in (None, "")})
