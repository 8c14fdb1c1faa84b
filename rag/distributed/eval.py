"""``rag eval --ray``: golden items fan out to worker actors; the driver alone writes ``results.jsonl``.

Each :class:`EvalWorker` builds the program once (index, retriever, LMs, judge) and then runs, judges and
scores one item per call with the same ``rag.eval.runner.run_item`` a local run uses. :class:`RayRunner` is the
``runner`` that ``rag.eval.runner.run_eval`` hands its pending items to: it keeps every worker busy with one item,
and passes each finished record to ``finish`` on the driver's thread, so the run folder, resume and the report
work exactly as for a local run.

Faults:

- a worker that dies mid-item (killed, out of memory, its node lost) is replaced, and its item runs again on
  another worker; an item is written only when a worker returned it, and at most once, so nothing is lost or
  doubled. An item whose workers died ``max_item_attempts`` times stops the run (it may be what kills them);
- an error inside an item is recorded in its record, as locally; a run-stopping one (``is_fatal``: a spent
  quota, auth, Ctrl-C) stops handing out items, lets the running ones finish and are written, and is raised;
- Ctrl-C on the driver kills the workers; what finished is on disk, and the same command resumes.

Usage ledger: as each hosted-model call ends, a worker sends its ledger row (``rag.usage.ledger.capture``) to the
run's :class:`UsageInbox` actor, and waits until the inbox has it, so the rows of calls already made outlive the
worker. The driver drains the inbox while it waits for items and once at the end (also after Ctrl-C or a
failure, once the workers are killed), and alone writes the rows to its ledger (``$SIEVE_HOME/usage.sqlite``),
each once (every row has a key unique in the cluster): every call is counted there once, on one machine or many,
including those of an item whose worker died and of items running at Ctrl-C. Not counted: a call that was in
flight when its worker died or was killed (sent, no answer recorded).
"""

from __future__ import annotations

import itertools
import os
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rag.distributed.cluster import say
from rag.errors import ModelError, QuotaExhausted, SieveError
from rag.eval.runner import is_fatal, item_context, run_item

MAX_ITEM_ATTEMPTS = 3  # workers that may die on one item before the run stops
MAX_REPLACEMENTS = 8  # dead workers replaced per run
START_TIMEOUT_S = 600.0  # a worker that has not built its program by then (no room in the cluster?) stops the run
POLL_S = 1.0  # how often the driver wakes while waiting (so Ctrl-C is seen promptly)
DRAIN_S = 2.0  # how often the driver writes the usage rows its workers sent
SEND_TIMEOUT_S = 60.0  # a worker waits at most this long for the inbox to take a usage row

Build = Callable[[], tuple[Any, Any, list[Any]]]  # () -> (agent, judge or None, index chunks), run on the worker


class UsageInbox:
    """The run's usage-ledger rows on their way to the driver (a Ray actor): ``put`` by workers, ``take`` by it."""

    def __init__(self):
        self.rows: dict[str, tuple] = {}

    def put(self, key: str, row: tuple) -> None:
        self.rows[key] = row

    def take(self) -> dict[str, tuple]:
        rows, self.rows = self.rows, {}
        return rows


class SendUsage:
    """In a worker, ``rag.usage.ledger.capture``'s ``send``: one row to the inbox under a key unique in the cluster
    (this process's random prefix and a sequence number), returning once the inbox has it."""

    def __init__(self, inbox: Any):
        self.inbox, self.prefix, self.seq = inbox, uuid.uuid4().hex, itertools.count()

    def __call__(self, row: tuple) -> None:
        import ray

        try:
            ray.get(self.inbox.put.remote(f"{self.prefix}-{next(self.seq)}", tuple(row)), timeout=SEND_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - the call itself succeeded; only its ledger row is lost
            print(f"sieve: a usage-ledger row did not reach the driver ({_first_line(exc)})", file=sys.stderr)


class EvalWorker:
    """One item at a time: ``run(item)`` -> its results.jsonl record. Made a Ray actor by :class:`RayRunner`."""

    def __init__(self, build: Build, ctx_args: dict[str, Any], limiter: Any = None, inbox: Any = None):
        if inbox is not None:  # ledger rows go to the driver (see the module's docstring)
            from rag.usage.ledger import capture

            capture(SendUsage(inbox))
        if limiter is not None:
            from rag.distributed.limiter import use_cluster_limiter

            use_cluster_limiter(limiter)
        self.limiter = limiter
        self.agent, judge, chunks = build()
        self.ctx = item_context(chunks=chunks, judge=judge, **ctx_args)

    def ready(self) -> int:
        return os.getpid()

    def run(self, item: Any) -> dict[str, Any]:
        try:
            return run_item(item, self.agent, **self.ctx)
        except QuotaExhausted as exc:  # spent for the whole organisation: stop every worker before its next call
            if self.limiter is not None:
                from rag.distributed.limiter import stop_all

                stop_all(self.limiter, str(exc))
            raise


@dataclass
class SettingsProgram:
    """The worker's program for a ``Settings`` (what ``rag eval`` builds locally), built on the worker."""

    settings: Any
    use_artifact: bool = True
    judge: bool = True

    def __call__(self) -> tuple[Any, Any, list[Any]]:
        from rag.agent.program import build_program
        from rag.lm.configure import configure_dspy

        configure_dspy(self.settings)  # a worker is an entry point of its own
        program = build_program(self.settings, use_artifact=self.use_artifact)  # as rag.open_agent builds it
        return program.agent, (program.judge if self.judge else None), program.agent.retriever.index.chunks


def _cause(exc: BaseException) -> BaseException:
    """The exception raised inside a worker, out of Ray's wrappers (for a one-line message)."""
    for _ in range(3):
        inner = getattr(exc, "cause", None)
        if not isinstance(inner, BaseException):
            break
        exc = inner
    return exc


class RayRunner:
    """``runner(todo, finish, **item_ctx)`` for ``run_eval``: items on ``workers`` actors of the connected cluster."""

    def __init__(self, build: Build, *, workers: int, cpus_per_worker: float = 1.0, limiter: Any = None,
                 max_item_attempts: int = MAX_ITEM_ATTEMPTS, max_replacements: int = MAX_REPLACEMENTS,
                 show_progress: bool = True, ledger: Any = None):
        self.build, self.workers, self.cpus, self.limiter = build, workers, cpus_per_worker, limiter
        self.ledger = ledger  # where the workers' usage rows go (rag.usage.ledger.Ledger; default: this machine's)
        self.usage_rows = 0  # rows written for the workers (tests)
        self.usage_keys: set[str] = set()  # the keys of the rows written: a row is never written twice
        self.inbox: Any = None
        self.max_item_attempts, self.max_replacements = max_item_attempts, max_replacements
        self.show_progress = show_progress
        self.pids: dict[Any, int] = {}  # actor -> worker process id (tests kill one)
        self.died: list[str] = []  # item ids whose worker died, in order
        self.timing: dict[str, float] = {}  # start_s: workers ready; run_s: items, once they were

    def _drain_usage(self) -> None:
        """Writes the usage rows the workers sent since the last drain to the driver's ledger, each once."""
        import ray

        from rag.usage.ledger import Ledger

        try:
            sent = ray.get(self.inbox.take.remote(), timeout=SEND_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - the items go on; say what the ledger may miss
            say(f"ray: the workers' usage-ledger rows could not be fetched ({_first_line(exc)})")
            return
        rows = [row for key, row in sent.items() if key not in self.usage_keys]
        if rows:
            self.ledger = self.ledger or Ledger()
            self.ledger.write_rows(rows)
            self.usage_rows += len(rows)
        self.usage_keys.update(sent)

    def _spawn(self, ctx_args: dict[str, Any]) -> Any:
        import ray

        actor = ray.remote(EvalWorker).options(num_cpus=self.cpus, max_restarts=0, max_concurrency=1)
        return actor.remote(self.build, ctx_args, self.limiter, self.inbox)

    def _start(self, count: int, ctx_args: dict[str, Any]) -> list[Any]:
        """``count`` workers, each with its program built; a worker that cannot build it stops the run here."""
        import ray

        actors = [self._spawn(ctx_args) for _ in range(count)]
        for actor in actors:
            try:
                self.pids[actor] = ray.get(actor.ready.remote(), timeout=START_TIMEOUT_S)
            except ray.exceptions.GetTimeoutError:
                for other in actors:
                    ray.kill(other)
                raise ModelError(f"no Ray worker started within {START_TIMEOUT_S:.0f}s: the cluster may lack "
                                 f"{self.cpus:g} free CPUs per worker (see `ray status`); try fewer --workers") from None
            except Exception as exc:  # noqa: BLE001 - the worker's own error, or Ray's word on why it died
                for other in actors:
                    ray.kill(other)
                cause = _cause(exc)
                if isinstance(cause, SieveError):
                    raise cause from None
                first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
                raise ModelError(f"a Ray worker could not build the program: {first}") from None
        return actors

    def __call__(self, todo: list[Any], finish: Callable[[dict[str, Any]], None], **ctx_args: Any) -> BaseException | None:
        if not todo:
            return None
        import ray

        count = min(self.workers, len(todo))
        if self.show_progress:
            say(f"ray: starting {count} workers ({self.cpus:g} CPU each) on {ray.get_runtime_context().gcs_address}")
        started = time.monotonic()
        self.inbox = ray.remote(UsageInbox).options(num_cpus=0, max_restarts=0).remote()
        try:
            return self._run(todo, finish, count, started, ctx_args)
        finally:  # the workers are killed by now: write what they sent, whatever stopped the run
            self._drain_usage()
            ray.kill(self.inbox)

    def _run(self, todo: list[Any], finish: Callable[[dict[str, Any]], None], count: int, started: float,
             ctx_args: dict[str, Any]) -> BaseException | None:
        import ray
        from ray.exceptions import RayActorError

        idle = self._start(count, ctx_args)
        self.timing = {"start_s": time.monotonic() - started}
        started = time.monotonic()
        alive = set(idle)
        queue, inflight = deque(todo), {}
        attempts: dict[str, int] = {}
        written: set[str] = set()
        replaced, failure = 0, None
        max_events = len(todo) * self.max_item_attempts + self.max_replacements  # completions this run can see
        next_drain = time.monotonic() + DRAIN_S
        try:
            for _ in range(max_events + 1):
                while queue and idle and failure is None:
                    actor, item = idle.pop(), queue.popleft()
                    inflight[actor.run.remote(item)] = (actor, item)
                if failure is not None:
                    queue.clear()
                if not inflight:
                    break
                ready: list[Any] = []
                while not ready:  # each pass returns within POLL_S, so Ctrl-C reaches the driver
                    ready, _ = ray.wait(list(inflight), num_returns=1, timeout=POLL_S)
                    if time.monotonic() >= next_drain:
                        self._drain_usage()
                        next_drain = time.monotonic() + DRAIN_S
                actor, item = inflight.pop(ready[0])
                try:
                    record = ray.get(ready[0])
                except RayActorError as exc:
                    alive.discard(actor)
                    self.died.append(item.id)
                    attempts[item.id] = attempts.get(item.id, 0) + 1
                    if attempts[item.id] >= self.max_item_attempts:
                        failure = failure or ModelError(
                            f"item {item.id}: its Ray worker died {attempts[item.id]} times ({_first_line(exc)}); "
                            "stopped so it cannot take more workers down; run the same command again to resume")
                    else:
                        queue.appendleft(item)
                    if replaced < self.max_replacements and failure is None:
                        replaced += 1
                        fresh = self._start(1, ctx_args)[0]
                        alive.add(fresh)
                        idle.append(fresh)
                    elif not alive:
                        failure = failure or ModelError(f"every Ray worker died ({replaced} replaced, the limit); "
                                                        "run the same command again to resume")
                    if self.show_progress:
                        say(f"ray: a worker died running {item.id}; "
                            + ("it runs again" if item in queue else "not retried"))
                    continue
                except Exception as exc:  # noqa: BLE001 - raised inside the item: fatal errors and bugs stop the run
                    failure = failure or (_cause(exc) if is_fatal(exc) or isinstance(_cause(exc), SieveError) else exc)
                    idle.append(actor)
                    continue
                idle.append(actor)
                if record["id"] not in written:
                    written.add(record["id"])
                    finish(record)
            else:
                failure = failure or RuntimeError(f"ray runner saw more than {max_events} completions")
        finally:
            self.timing["run_s"] = time.monotonic() - started
            for actor in alive | set(idle):
                ray.kill(actor)
        if self.show_progress:
            say(f"ray: {len(written)} items in {self.timing['run_s']:.1f}s on {count} workers "
                f"(+{self.timing['start_s']:.1f}s to start them)")
        return failure


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


LOCAL_LM_PREFIXES = ("embedded/", "gguf/")  # in-process models: one worker per node, using all its cores


def make_runner(address: str, settings: Any, lms: dict[str, Any], *, workers: int | None = None,
                use_artifact: bool = True, judge: bool = True, show_progress: bool = True) -> RayRunner:
    """The runner ``rag eval --ray ADDRESS`` uses: one worker per CPU for hosted models (all sharing the cluster's
    rate limiter), one per node for in-process models (each loads its own and uses the node's cores)."""
    from rag.distributed.cluster import cluster_cpus, connect, largest_node_cpus, plan_workers
    from rag.distributed.limiter import limiter_actor

    connect(address, quiet=not show_progress)
    models = [str(getattr(lm, "model", lm)) for lm in lms.values()]
    local = any(m.startswith(LOCAL_LM_PREFIXES) for m in models)
    cpus = float(largest_node_cpus()) if local else 1.0
    count = plan_workers(workers, cpus_per_worker=cpus)
    cpus = min(cpus, cluster_cpus() / count)  # --workers beyond the nodes: share their cores instead of waiting
    hosted = any(m.startswith("groq/") for m in models)
    return RayRunner(SettingsProgram(settings, use_artifact, judge), workers=count, cpus_per_worker=cpus,
                     limiter=limiter_actor() if hosted else None, show_progress=show_progress)


def plan_runner(plan: Any, address: str | None, *, workers: int | None = None,
                show_progress: bool = True) -> RayRunner | None:
    """The runner for an assembled evaluation (``rag.eval.presets.EvalPlan``) on the Ray cluster at ``address``;
    None without an address, so the items run in this process."""
    if address is None:
        return None
    return make_runner(address, plan.settings, plan.program.lms, workers=workers, use_artifact=plan.use_artifact,
                       judge=plan.judge, show_progress=show_progress)
