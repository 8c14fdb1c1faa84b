"""The agent's trace: one record per step, plus totals. JSON-serialisable both ways.

Nodes, in the order the agent may take them::

    retrieve -> grade -> (answer | rewrite -> retrieve -> grade ... | refuse)

An index with tables adds ``route`` first (docs, data or both), ``sql`` steps (each statement, its guard or DuckDB
verdict and its result) and, after an answer, ``critique`` (the grounding critic; an ungrounded answer is written
again once as ``answer`` and then ``critique`` again).

The evaluation harness, ``rag ask --trace`` and the notebooks read this structure. ``observe`` lets a caller
watch steps as they are added (``rag serve`` streams them to the page).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Node = Literal["route", "retrieve", "grade", "rewrite", "sql", "answer", "critique", "refuse"]
NODES: tuple[str, ...] = ("route", "retrieve", "grade", "rewrite", "sql", "answer", "critique", "refuse")
_OBSERVERS: ContextVar[tuple[Callable[["Trace", "Step"], None], ...]] = ContextVar("sieve_trace_observers", default=())


@contextmanager
def observe(callback: Callable[["Trace", "Step"], None]) -> Iterator[None]:
    """Call ``callback(trace, step)`` whenever a step is added to a Trace in this thread (or task) while inside the
    ``with`` block. The agent adds a step when the node starts and fills it in as the node runs, so at each call
    the new step has just started and the one before it has finished."""
    token = _OBSERVERS.set(_OBSERVERS.get() + (callback,))
    try:
        yield
    finally:
        _OBSERVERS.reset(token)


@dataclass
class Step:
    node: str
    query: str | None = None  # the search query (retrieve), or the query that was graded (grade)
    hits: list[dict[str, Any]] = field(default_factory=list)  # retrieve: Hit.to_dict() without text
    verdict: bool | None = None  # grade: is the shown context relevant?
    reason: str | None = None  # grade: why; refuse: why
    chosen_ids: list[str] = field(default_factory=list)  # grade: relevant ids; answer: valid cited ids
    subject: str | None = None  # grade: what the grader said the question asks about (checked against the passages)
    shown_ids: list[str] = field(default_factory=list)  # grade/answer: ids of the chunks put in the prompt
    rewrite: str | None = None  # rewrite: the new query
    expansions: list[str] = field(default_factory=list)  # retrieve: rephrasings of the query also searched
    hyde: str | None = None  # retrieve: the hypothetical passage searched by embedding (never shown to the answerer)
    answer: str | None = None  # answer/refuse: the text returned to the user
    route: str | None = None  # route: docs, data or both
    sql: str | None = None  # sql: the statement as written by the model
    result: dict[str, Any] | None = None  # sql: the statement run, its columns, rows, truncated; its evidence id
    check: str | None = None  # critique: the critic's check that gave the verdict (rag.agent.critique.CHECKS, coverage)
    latency_ms: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    model: str | None = None
    cached: bool = False  # served from the DSPy cache (latency is what was measured now)
    notes: list[str] = field(default_factory=list)  # e.g. dropped citations, truncated context

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def record(self, stats: Any) -> None:
        """Take one LM call's measurements (rag.usage.metering.CallStats) as this step's."""
        self.latency_ms, self.tokens_in, self.tokens_out = stats.latency_ms, stats.tokens_in, stats.tokens_out
        self.cost, self.model, self.cached = stats.cost, stats.model, stats.cached
        self.notes.extend(stats.notes)

    def add_call(self, stats: Any) -> None:
        """Add one more LM call's latency, tokens and cost to this step's (a step that made several calls)."""
        self.latency_ms += stats.latency_ms
        self.tokens_in, self.tokens_out = self.tokens_in + stats.tokens_in, self.tokens_out + stats.tokens_out
        self.cost += stats.cost

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Step":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class Trace:
    question: str
    steps: list[Step] = field(default_factory=list)
    outcome: str | None = None  # "answered" | "refused"; "cancelled" when rag serve stopped it (rag.serve.stream)

    def add(self, step: Step) -> Step:
        self.steps.append(step)
        for callback in _OBSERVERS.get():
            callback(self, step)
        return step

    def of(self, node: str) -> list[Step]:
        return [s for s in self.steps if s.node == node]

    @property
    def totals(self) -> dict[str, Any]:
        return {
            "steps": len(self.steps),
            "rewrites": len(self.of("rewrite")),
            "outcome": self.outcome,
            "latency_ms": round(sum(s.latency_ms for s in self.steps), 2),
            "tokens_in": sum(s.tokens_in for s in self.steps),
            "tokens_out": sum(s.tokens_out for s in self.steps),
            "cost": round(sum(s.cost for s in self.steps), 8),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "outcome": self.outcome,
                "steps": [s.to_dict() for s in self.steps], "totals": self.totals}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Trace":
        return cls(question=data["question"], outcome=data.get("outcome"),
                   steps=[Step.from_dict(s) for s in data.get("steps", [])])

    def render(self) -> str:
        """A readable, step-by-step account (``rag ask --trace``, notebooks). Passages from files with pages (PDF,
        DOCX) show them after their id, where retrieved and where cited: ``handbook.pdf#004 (p. 12)``."""
        from rag.ingest.chunking import page_label

        pages = {h["chunk_id"]: page_label(h.get("meta")) for s in self.steps for h in s.hits}
        lines = [f"Q: {self.question}"]
        for i, s in enumerate(self.steps, 1):
            head = f"{i}. {s.node:<8}"
            cost = f"  [{s.latency_ms:.0f} ms, {s.tokens_in}+{s.tokens_out} tok{', cached' if s.cached else ''}]"
            if s.node == "retrieve":
                ids = ", ".join(with_page(h["chunk_id"], pages) for h in s.hits)
                lines.append(f"{head} query={s.query!r} -> {ids}{cost}")
                lines.extend(f"   also searched: {q!r}" for q in s.expansions)
                if s.hyde:
                    lines.append(f"   hypothetical passage searched: {s.hyde[:160]!r}")
            elif s.node == "grade":
                verdict = "RELEVANT" if s.verdict else "NOT RELEVANT"
                lines.append(f"{head} {verdict} ids={s.chosen_ids} reason={s.reason!r}{cost}")
            elif s.node in ("rewrite", "condense"):
                lines.append(f"{head} {s.query!r} -> {s.rewrite!r}{cost}")
            elif s.node == "route":
                lines.append(f"{head} {s.route} reason={s.reason!r}{cost}")
            elif s.node == "sql":
                verdict = f"[{s.result['id']}] {len(s.result['rows'])} row(s)" if s.result else f"FAILED: {s.reason}"
                lines.append(f"{head} {(s.sql or '')!r} -> {verdict}{cost}")
                if s.result:
                    lines.extend(f"   {line}" for line in str(s.result.get("text", "")).splitlines()[:12])
            elif s.node == "critique":
                verdict = ("GROUNDED" if s.verdict else "NOT GROUNDED") + (f" ({s.check})" if s.check else "")
                lines.append(f"{head} {verdict} reason={s.reason!r}{cost}")
            else:
                cited = [with_page(c, pages) for c in s.chosen_ids]
                lines.append(f"{head} cited={cited} {(s.answer or '')[:160]!r}{cost}")
            lines.extend(f"   note: {n}" for n in s.notes)
        t = self.totals
        lines.append(f"= {t['outcome']}: {t['steps']} steps, {t['rewrites']} rewrites, "
                     f"{t['latency_ms']:.0f} ms, {t['tokens_in']}+{t['tokens_out']} tokens, ${t['cost']:.6f}")
        return "\n".join(lines)


def with_page(chunk_id: str, pages: dict[str, str]) -> str:
    """``id (p. 12)`` when ``pages`` (chunk id -> page label) knows the passage's page, else the id."""
    label = pages.get(chunk_id)
    return f"{chunk_id} ({label})" if label else chunk_id
