"""Questions as jobs: a bounded queue, a thread per job that runs the agent when a worker slot is free, and the
events each job emits.

A job's events, in order (each a ``(kind, data)`` pair, sent to the page as server-sent events):

``progress`` where the job stands (``Job.progress``): first when it is accepted, then whenever the queue ahead of it
             moves or its loading enters a new phase, and (``rag.serve.app``) every second while nothing else comes
``program``  the program that will answer: configuration, artifact (or why none), models (``rag ask``'s first line),
             and ``loaded``: the loading phases this job waited through, each with its time
``start``    a node began: ``{"index", "node"}``
``token``    the answer node's answer as the model has written it so far: ``{"index", "text"}`` (the whole text so far, not
             a piece; at most every ``TOKEN_EVERY_S``, and once more when the field is complete or the next node
             starts). Only from a model that streams (the embedded one and Groq/OpenAI-compatible ones,
             ``rag.lm.streaming``): a cached answer or a LiteLLM model string sends none. The ``step`` and ``done`` events
             that follow are what the agent made of it (citations checked, text cleaned)
``step``     a node finished: its ``rag.agent.trace.Step`` as a dict, plus ``index``
``done``     the prediction (``rag.agent.module.prediction_to_dict``), its passages with their text (``Programs.with_texts``),
             with the program description
``error``    ``{"message"}``: one line, as the CLI would print it

Steps are seen through ``rag.agent.trace.observe``: the agent adds a step when its node starts, so when a step is added
the one before it has finished, and the last one has finished when the agent returns.

``progress`` carries ``state``: ``queued`` (``ahead``: the questions running or waiting before it), ``loading`` (the
first question for a configuration builds its program; ``phase``: ``assemble`` the embedded model's file, build the
``program`` (index, encoder), ``check`` that llama.cpp runs the model on this CPU, load the ``model``; ``phase_s``:
how long this phase has taken so far) or ``running`` (``node`` and ``node_s``). Loading happens before the first
node, never inside it, so its time is never charged to a step (``rag.agent.program.load_models``).

The embedded model serialises its calls (one lock), so one worker slot is the default: questions wait their turn in a
queue of at most ``max_waiting``; past that ``submit`` raises ``QueueFull`` (HTTP 503 with Retry-After).

A request whose client has gone away (Stop on the page, a new question from it, a closed page) ``drop``s its job:
a queued one leaves the queue at once; a running one gives its worker slot back at once, so the next question
starts, and stops when its next node starts (``Abandoned``): no further model call is made for it. The call already
under way stops too (the listener's ``cancelled`` check, ``rag.lm.streaming``): the embedded model at its next token,
a hosted model's stream when its next piece arrives, raising ``rag.errors.Cancelled``; an engine that cannot stop (a
LiteLLM model string) finishes it in the background, the job counting against the queue's capacity until then. A job
stopped while running ends with state ``cancelled``, its trace's outcome ``"cancelled"``, an entry in
``Runner.log`` and one line on stderr.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rag.agent.trace import Step, Trace, observe
from rag.errors import Cancelled, SieveError
from rag.lm import streaming
from rag.serve.programs import Programs

RETRY_AFTER_S = 10
LOG_SIZE = 200  # Runner.log keeps the most recent cancellations
ENDED = ("done", "cancelled")
TOKEN_EVERY_S = 0.1  # at most this often a token event: the page redraws the answer once per event
STREAMED_NODE, STREAMED_FIELD = "answer", "answer"  # the node whose model call streams, and the output field shown


class Abandoned(Exception):
    """Raised into the agent when the next node of a dropped job starts: nobody is waiting for its answer."""


class QueueFull(Exception):
    def __init__(self, waiting: int) -> None:
        super().__init__(f"the server is busy: {waiting} question(s) are already waiting; try again in "
                         f"{RETRY_AFTER_S} s")
        self.retry_after = RETRY_AFTER_S


class AnswerStream:
    """The listener of one job's model calls (``rag.lm.streaming.listen``): while its answer node runs, the answer field
    of what the model writes goes to the job as ``token`` events, at most every ``every_s``, when the field is complete,
    and, for what was held back, when the next node starts; the text of any other node's calls is read by nobody.
    Called on the job's worker thread."""

    def __init__(self, job: "Job", every_s: float = TOKEN_EVERY_S) -> None:
        self.job, self.every_s = job, every_s
        self.index: int | None = None  # the step being streamed, None outside the answer node
        self.field = streaming.FieldStream(STREAMED_FIELD)
        self.sent_at, self.sent = -math.inf, None  # when the last token event went, and its text

    def node(self, index: int, node: str) -> None:
        """A node started (``rag.agent.trace.observe``): the answer node before it, if any, sends the text it held back
        (the page shows it while the next node, the critic, runs); this one is streamed if it is an answer node."""
        self.finish()
        self.index = index if node == STREAMED_NODE else None
        self.on_call()

    def finish(self) -> None:
        """The node is over: send the answer's text as far as the throttle held it back."""
        value = self.field.value
        if self.index is not None and value and value != self.sent and not self.job.cancelled:
            self.sent = value
            self.job.emit("token", {"index": self.index, "text": value})

    def on_call(self) -> None:
        """A model call begins: its text starts over (a call made again within the node)."""
        self.field.start()
        self.sent_at, self.sent = -math.inf, None

    def on_text(self, delta: str) -> None:
        if self.index is None or self.job.cancelled:
            return
        value = self.field.feed(delta)
        now = time.monotonic()
        if value and value != self.sent and (self.field.complete or now - self.sent_at >= self.every_s):
            self.sent_at, self.sent = now, value
            self.job.emit("token", {"index": self.index, "text": value})


@dataclass(eq=False)  # jobs are told apart by identity (the queue looks them up)
class Job:
    question: str
    config: str
    artifact: str
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    state: str = "queued"  # queued | loading | running | done | cancelled
    node: str | None = None
    node_started: float = 0.0
    phase: str | None = None  # while loading: assemble | program | check | model
    detail: str | None = None  # what the phase works on (the model's name)
    phase_started: float = 0.0
    loaded: list[dict[str, Any]] = field(default_factory=list)  # the phases waited through: phase, detail, s
    submitted: float = field(default_factory=time.monotonic)
    cancelled: bool = False
    trace: Trace | None = None  # the agent's trace, as far as it got (its outcome "cancelled" when stopped)
    alive: Callable[[], bool] | None = None  # is its client still there? (asked from the worker thread)
    stopped_before: str | None = None  # the node that did not run because the job was stopped
    history: list[dict[str, str]] = field(default_factory=list)  # a follow-up's earlier turns, oldest first

    def emit(self, kind: str, data: Any) -> None:
        """Hand an event to the request that waits on this job (called from the worker thread)."""
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, data))
        except RuntimeError:  # the event loop is closed: nobody is listening any more
            self.cancelled = True

    def wanted(self) -> bool:
        """Not dropped, and its client still there as far as ``alive`` can tell (True when it cannot)."""
        if self.cancelled:
            return False
        try:
            return self.alive is None or bool(self.alive())
        except Exception:  # noqa: BLE001 - the loop closed or did not answer in time: run it, drop() still stops it
            return True

    def enter(self, phase: str | None, detail: str | None = None) -> None:
        """Begin a loading phase (None: loading is over); the one before it goes to ``loaded`` with its time."""
        now = time.monotonic()
        if self.phase is not None:
            self.loaded.append({"phase": self.phase, "detail": self.detail, "s": round(now - self.phase_started, 2)})
        self.phase, self.detail, self.phase_started = phase, detail, now

    def progress(self, ahead: int) -> dict[str, Any]:
        now = time.monotonic()
        return {"state": self.state, "ahead": ahead,
                "phase": self.phase, "detail": self.detail,
                "phase_s": round(now - self.phase_started, 1) if self.phase else None,
                "node": self.node, "node_s": round(now - self.node_started, 1) if self.node else None,
                "total_s": round(now - self.submitted, 1)}


class Runner:
    """Runs jobs on their own threads, at most ``workers`` at a time; at most ``max_waiting`` more wait their turn
    (questions that were stopped while running count against that too until their last model call returns)."""

    def __init__(self, programs: Programs, *, workers: int = 1, max_waiting: int = 8) -> None:
        self.programs = programs
        self.workers = workers
        self.max_waiting = max_waiting
        self.log: deque[dict[str, Any]] = deque(maxlen=LOG_SIZE)  # cancelled jobs, the latest last
        self._waiting: deque[Job] = deque()
        self._running: list[Job] = []  # holding a worker slot
        self._draining: list[Job] = []  # dropped while running: the slot is given back, the thread ends at its next node
        self._cond = threading.Condition()
        self._closed = False
        self._ids = itertools.count(1)

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._closed or self._load() >= self.workers + self.max_waiting:
                raise QueueFull(len(self._waiting))
            self._waiting.append(job)
            job.emit("progress", job.progress(self._ahead(job)))  # where it stands, before anything can move
        threading.Thread(target=self._run, args=(job,), name=f"sieve-ask-{next(self._ids)}", daemon=True).start()

    def ahead(self, job: Job) -> int:
        """Questions before this one: those running and those waiting ahead of it (0 once it runs)."""
        with self._cond:
            return self._ahead(job)

    def pending(self) -> int:
        """Questions waiting or running, and stopped ones whose last model call is still under way."""
        with self._cond:
            return self._load()

    def drop(self, job: Job) -> None:
        """Nobody waits for ``job`` any more: take it out of the queue, or give its worker slot back and stop it at its
        next node if it runs. A job that has ended already is left as it is."""
        with self._cond:
            if job.state in ENDED:
                return
            job.cancelled = True
            if job in self._waiting:
                self._waiting.remove(job)
                self._cancelled(job, None)
            elif job in self._running:
                self._running.remove(job)
                self._draining.append(job)
            self._moved()

    def shutdown(self) -> None:
        with self._cond:
            self._closed = True
            for job in list(self._waiting):
                job.cancelled = True
            self._waiting.clear()
            self._cond.notify_all()

    # ---------------------------------------------------------------- inside (the lock held where it says so)
    def _load(self) -> int:
        return len(self._waiting) + len(self._running) + len(self._draining)

    def _ahead(self, job: Job) -> int:
        return len(self._running) + self._waiting.index(job) if job in self._waiting else 0

    def _moved(self) -> None:
        """The queue moved (lock held): wake the waiting threads, and tell each waiting job where it stands now."""
        for job in self._waiting:
            job.emit("progress", job.progress(self._ahead(job)))
        self._cond.notify_all()

    def _turn(self, job: Job) -> bool:
        """Wait until ``job`` is first in line and a worker slot is free; then take the slot (True), unless the job
        was dropped, or its client turns out to have gone without its request having noticed yet (False)."""
        while True:
            with self._cond:
                while job in self._waiting and not (self._waiting[0] is job and len(self._running) < self.workers):
                    self._cond.wait()
                if job not in self._waiting:  # dropped while it waited
                    return False
            # Asked outside the lock (it waits on the event loop): clients that hang up together, as a closed page's
            # do, must not have their questions started one by one in the slot a dropped one just gave back.
            if not job.wanted():
                self.drop(job)
                return False
            with self._cond:
                if job in self._waiting and self._waiting[0] is job and len(self._running) < self.workers:
                    self._waiting.popleft()
                    self._running.append(job)
                    job.state = "loading" if not self.programs.is_built(job.config, job.artifact) else "running"
                    self._moved()
                    return True

    def _run(self, job: Job) -> None:
        if not self._turn(job):
            return
        try:
            if not job.cancelled:
                self._answer(job)
        finally:
            with self._cond:
                for place in (self._running, self._draining):
                    if job in place:
                        place.remove(job)
                if job.cancelled and job.state not in ENDED:  # stopped before its first node, or after its last one
                    self._cancelled(job, job.trace)
                job.state = job.state if job.state in ENDED else "done"
                self._moved()

    def _answer(self, job: Job) -> None:
        from rag.agent.module import prediction_to_dict

        try:
            def on_phase(phase: str, detail: str | None = None) -> None:
                job.enter(phase, detail)
                job.emit("progress", job.progress(0))

            program, settings = self.programs.get(job.config, job.artifact, on_phase=on_phase)
            job.enter(None)
            described = self.programs.describe(job.config, program, settings)
            job.emit("program", {**described, "loaded": list(job.loaded)})
            if job.cancelled:  # its client went away while the program loaded
                return
            job.state = "running"

            answer = AnswerStream(job)

            def on_step(trace: Trace, step: Step) -> None:
                job.trace = trace
                answer.node(len(trace.steps) - 1, step.node)
                if job.cancelled:  # the node does not run: it leaves the trace, which ends "cancelled"
                    trace.steps.pop()
                    job.stopped_before = step.node
                    raise Abandoned()
                if len(trace.steps) > 1:
                    job.emit("step", _step(trace, len(trace.steps) - 2))
                job.node, job.node_started = step.node, time.monotonic()
                job.emit("start", {"index": len(trace.steps) - 1, "node": step.node})

            with observe(on_step), streaming.listen(answer.on_text, answer.on_call, cancelled=lambda: job.cancelled):
                pred = program.agent(question=job.question, history=job.history or None)
            job.trace = pred.trace
            if job.cancelled:  # its last node was under way: the answer goes nowhere
                return
            answer.finish()
            job.node = None
            job.emit("step", _step(pred.trace, len(pred.trace.steps) - 1))
            job.state = "done"  # before the event: the request drops its job when it has the answer
            job.emit("done", {**self.programs.with_texts(prediction_to_dict(pred), program), **described})
        except (Abandoned, Cancelled) as exc:  # Cancelled: the model call under way was cut (rag.lm.streaming)
            if isinstance(exc, Cancelled) and job.trace is not None and job.trace.steps:
                job.trace.steps[-1].notes.append("stopped while the model was writing")
            with self._cond:
                self._cancelled(job, job.trace)
        except SieveError as exc:
            job.state = "done"
            job.emit("error", {"message": str(exc)})
        except Exception as exc:  # noqa: BLE001 - reported to the page and on stderr, never a silent stall
            traceback.print_exc(file=sys.stderr)
            job.state = "done"
            job.emit("error", {"message": f"internal error: {type(exc).__name__}: {exc}"})

    def _cancelled(self, job: Job, trace: Trace | None) -> None:
        """Record that ``job`` was stopped (lock held): its state, its trace's outcome, the log and stderr."""
        where = job.state  # queued, loading or running
        job.state = "cancelled"
        if trace is not None:
            trace.outcome = "cancelled"
        ran = [s.node for s in trace.steps] if trace is not None else []
        entry = {"question": job.question, "config": job.config, "state": "cancelled", "while": where,
                 "steps": ran, "stopped_before": job.stopped_before,
                 "after_s": round(time.monotonic() - job.submitted, 1)}
        self.log.append(entry)
        before = f", before {job.stopped_before}" if job.stopped_before else ""
        print(f"rag serve: cancelled a question while {where} ({len(ran)} step(s) done{before}, after "
              f"{entry['after_s']} s): {job.question[:80]!r}", file=sys.stderr, flush=True)


def _step(trace: Trace, index: int) -> dict[str, Any]:
    return {"index": index, **trace.steps[index].to_dict()}


def sse(kind: str, data: Any) -> str:
    """One server-sent event (JSON has no raw newlines, so one ``data:`` line)."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
