"""Per-call records for an agent's trace: model, tokens in/out, cost, latency, notes.

Sieve's engines (embedded and Groq) report every completed call to the recorders opened
in the current context::

    with record_calls() as calls:
        prediction = grader(question=q, context=ctx)
    for call in calls:   # LMCall(model=..., input_tokens=..., output_tokens=..., cost_usd=..., latency_s=...)
        ...

Recorders are context-local (``contextvars``): each thread or task sees only its own calls,
nested recorders all receive them. DSPy cache hits never reach an engine, so they are not
recorded (they cost nothing). For other LMs (LiteLLM strings) use ``dspy.track_usage()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LMCall:
    model: str
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    latency_s: float
    attempts: int = 1  # hosted models: 1 + retries
    notes: tuple[str, ...] = field(default_factory=tuple)  # context truncation, unparsable structured output

    @classmethod
    def from_history(cls, entry: dict[str, Any]) -> "LMCall":
        """The same record from a ``dspy.LM.history`` entry made by a Sieve engine."""
        sieve = (getattr(entry.get("response"), "provider_data", None) or {}).get("sieve", {})
        usage = entry.get("usage") or {}
        return cls(entry["model"], usage.get("prompt_tokens"), usage.get("completion_tokens"), sieve.get("cost_usd"),
                   sieve.get("latency_s", 0.0), sieve.get("attempts", 1), tuple(sieve.get("notes", ())))


_RECORDERS: ContextVar[tuple[list[LMCall], ...]] = ContextVar("sieve_lm_recorders", default=())


@contextmanager
def record_calls() -> Iterator[list[LMCall]]:
    """Collect the ``LMCall`` of every engine call made inside the block (this context only)."""
    calls: list[LMCall] = []
    token = _RECORDERS.set((*_RECORDERS.get(), calls))
    try:
        yield calls
    finally:
        _RECORDERS.reset(token)


def emit(call: LMCall) -> None:
    """Engines call this once per completed call."""
    for calls in _RECORDERS.get():
        calls.append(call)
