"""Follow-up questions: the conversation so far, bounded, and the question made standalone before the agent runs.

    follow-up + earlier turns -> condense -> standalone question -> retrieve, grade, answer or refuse

Retrieval, the grader and the refusal all see the standalone question: "and which statement changes a global
one?" after a question about ``nonlocal`` is searched as what it means, not as its words. A first question (no
history) costs nothing: the condenser is not called. The history is bounded twice, by turns and by characters
(``history_turns``, ``history_chars``), oldest turns dropped first, so a long conversation never grows the prompt.
Nothing is kept between calls: the caller (``rag chat``, the web page, ``rag.Agent``) holds its own history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dspy

from rag.agent.trace import Step, Trace
from rag.errors import DataError, InputError, SieveError
from signatures import FollowUpCondenser

ANSWER_CHARS = 600  # of each earlier answer, the start is what a follow-up refers to


@dataclass(frozen=True)
class Turn:
    question: str
    answer: str

    @classmethod
    def of(cls, turn: Any, where: str = "history") -> "Turn":
        """A Turn from a Turn, a ``{"question", "answer"}`` mapping or a ``(question, answer)`` pair."""
        if isinstance(turn, Turn):
            return turn
        if isinstance(turn, Mapping):
            q, a = turn.get("question"), turn.get("answer")
        elif isinstance(turn, (list, tuple)) and len(turn) == 2:
            q, a = turn
        else:
            q = a = None
        if not isinstance(q, str) or not isinstance(a, str):
            raise InputError(f"{where}: each turn is {{\"question\": str, \"answer\": str}}, got {turn!r:.80}")
        return cls(q, a)


def bounded(history: Iterable[Any], turns: int, chars: int) -> list[Turn]:
    """The last ``turns`` turns of ``history``, fewer while their text is over ``chars`` (the latest turn is kept)."""
    kept = [Turn.of(t) for t in history][-turns:] if turns > 0 else []
    while len(kept) > 1 and len(conversation_text(kept)) > chars:
        kept = kept[1:]
    return kept


def conversation_text(turns: list[Turn]) -> str:
    return "\n".join(f"Q: {t.question.strip()}\nA: {' '.join(t.answer.split())[:ANSWER_CHARS]}" for t in turns)


def context_query(follow_up: str, history: Iterable[Any]) -> str:
    """The last earlier question and the follow-up as one search text: the words a follow-up leaves out ("it",
    "one of those") are usually the last question's subject. Searched beside the standalone question, it needs
    no model, so it still helps when a small model's condenser returns the follow-up unchanged."""
    turns = [Turn.of(t) for t in history]
    return f"{turns[-1].question.strip()} {follow_up.strip()}" if turns else follow_up


class Condenser(dspy.Module):
    def __init__(self, turns: int = 3, chars: int = 2000):
        super().__init__()
        self.turns, self.chars = turns, chars  # the history's bounds (settings history_turns, history_chars)
        self.condense = dspy.Predict(FollowUpCondenser)

    def standalone(self, follow_up: str, history: Iterable[Any], trace: Trace, call: Callable[..., Any]) -> str:
        """``follow_up`` made standalone from ``history``, as a ``condense`` step; the follow-up as it is when there
        is no history or the model's output cannot be used."""
        turns = bounded(history, self.turns, self.chars)
        if not turns:
            return follow_up
        step = trace.add(Step(node="condense", query=follow_up))
        step.shown_ids = []
        try:
            pred, stats = call("rewriter", self.condense, [], conversation=conversation_text(turns), follow_up=follow_up)
        except SieveError as exc:
            if not isinstance(exc, DataError):
                raise
            pred, problem = None, str(exc)
        except Exception as exc:  # an output the adapter cannot parse
            pred, problem = None, " ".join(str(exc).split())[:200]
        if pred is None:
            step.notes.append(f"condenser output unusable ({problem}); the follow-up is searched as asked")
            return follow_up
        step.record(stats)
        question = " ".join(str(pred.question or "").split())
        step.rewrite = question or follow_up
        step.notes.append(f"read {len(turns)} earlier turn(s)")
        return step.rewrite
