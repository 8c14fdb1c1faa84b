"""Questions as jobs: a bounded queue, worker threads that run the agent, and the events each job emits.

A job's events, in order (each a ``(kind, data)`` pair, sent to the page as server-sent events):

``program``  the program that will answer: configuration, artifact (or why none), models (``rag ask``'s first line)
``start``    a node began: ``{"index", "node"}``
``step``     a node finished: its ``rag.agent.trace.Step`` as a dict, plus ``index``
``done``     the prediction (``rag.agent.module.prediction_to_dict``) with the program description
``error``    ``{"message"}``: one line, as the CLI would print it

Steps are seen through ``rag.agent.trace.observe``: the agent adds a step when its node starts, so when a step is added
the one before it has finished, and the last one has finished when the agent returns. While a job waits in the
queue, loads its program or waits for a model, ``progress`` says where it stands (``Job.progress``).

The embedded model serialises its calls (one lock), so one worker is the default: questions wait their turn in a
queue of at most ``max_waiting``; past that ``submit`` raises ``QueueFull`` (HTTP 503 with Retry-After).

A request whose client has gone away ``drop``s its job: a queued one leaves the queue at once (it no longer holds a
place that others wait behind), a running one stops when its next node starts (``Abandoned``), so no further model
call is made for it; the model call already under way finishes.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import traceback
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rag.agent.trace import Step, Trace, observe
from rag.errors import SieveError
from rag.serve.programs import Programs

RETRY_AFTER_S = 10


class Abandoned(Exception):
    """Raised into the agent when the next node of a dropped job starts: nobody is waiting for its answer."""


class QueueFull(Exception):
    def __init__(self, waiting: int) -> None:
        super().__init__(f"the server is busy: {waiting} question(s) are already waiting; try again in "
                         f"{RETRY_AFTER_S} s")
        self.retry_after = RETRY_AFTER_S


@dataclass(eq=False)  # jobs are told apart by identity (the queue looks them up)
class Job:
    question: str
    config: str
    artifact: str
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    state: str = "queued"  # queued | loading | running | done
    node: str | None = None
    node_started: float = 0.0
    submitted: float = field(default_factory=time.monotonic)
    cancelled: bool = False

    def emit(self, kind: str, data: Any) -> None:
        """Hand an event to the request that waits on this job (called from the worker thread)."""
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, data))
        except RuntimeError:  # the event loop is closed: nobody is listening any more
            self.cancelled = True

    def progress(self, ahead: int) -> dict[str, Any]:
        now = time.monotonic()
        return {"state": self.state, "ahead": ahead, "node": self.node,
                "node_s": round(now - self.node_started, 1) if self.node else None,
                "total_s": round(now - self.submitted, 1)}


class Runner:
    """Runs jobs on ``workers`` threads; at most ``max_waiting`` wait for a free worker."""

    def __init__(self, programs: Programs, *, workers: int = 1, max_waiting: int = 8) -> None:
        self.programs = programs
        self.workers = workers
        self.max_waiting = max_waiting
        self._waiting: deque[Job] = deque()
        self._running = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sieve-ask")

    def submit(self, job: Job) -> None:
        with self._lock:
            if len(self._waiting) + self._running >= self.workers + self.max_waiting:
                raise QueueFull(len(self._waiting))
            self._waiting.append(job)
        self._pool.submit(self._run, job)

    def ahead(self, job: Job) -> int:
        """Questions waiting before this one (0 once it runs)."""
        with self._lock:
            return self._waiting.index(job) if job in self._waiting else 0

    def pending(self) -> int:
        """Questions waiting or running."""
        with self._lock:
            return len(self._waiting) + self._running

    def drop(self, job: Job) -> None:
        """Nobody waits for ``job`` any more: take it out of the queue, or stop it at its next node if it runs."""
        job.cancelled = True
        with self._lock:
            if job in self._waiting:
                self._waiting.remove(job)
                job.state = "done"

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self, job: Job) -> None:
        with self._lock:
            if job not in self._waiting:  # dropped while it waited
                return
            self._waiting.remove(job)
            self._running += 1
        try:
            if not job.cancelled:
                self._answer(job)
        finally:
            with self._lock:
                self._running -= 1
            job.state = "done"

    def _answer(self, job: Job) -> None:
        from rag.agent.module import prediction_to_dict

        try:
            job.state = "loading" if not self.programs.is_built(job.config, job.artifact) else "running"
            program, settings = self.programs.get(job.config, job.artifact)
            described = self.programs.describe(job.config, program, settings)
            job.emit("program", described)
            job.state = "running"
            if job.cancelled:  # its client went away while the program loaded
                return

            def on_step(trace: Trace, step: Step) -> None:
                if job.cancelled:
                    raise Abandoned()
                if len(trace.steps) > 1:
                    job.emit("step", _step(trace, len(trace.steps) - 2))
                job.node, job.node_started = step.node, time.monotonic()
                job.emit("start", {"index": len(trace.steps) - 1, "node": step.node})

            with observe(on_step):
                pred = program.agent(question=job.question)
            job.node = None
            job.emit("step", _step(pred.trace, len(pred.trace.steps) - 1))
            job.emit("done", {**prediction_to_dict(pred), **described})
        except Abandoned:
            return
        except SieveError as exc:
            job.emit("error", {"message": str(exc)})
        except Exception as exc:  # noqa: BLE001 - reported to the page and on stderr, never a silent stall
            traceback.print_exc(file=sys.stderr)
            job.emit("error", {"message": f"internal error: {type(exc).__name__}: {exc}"})


def _step(trace: Trace, index: int) -> dict[str, Any]:
    return {"index": index, **trace.steps[index].to_dict()}


def sse(kind: str, data: Any) -> str:
    """One server-sent event (JSON has no raw newlines, so one ``data:`` line)."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
