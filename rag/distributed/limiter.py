"""One rate limiter for every worker of a cluster: a named Ray actor holding the per-model budgets.

Groq's limits apply to the whole organisation, so N workers that each kept their own ``RateLimiter`` would
together send N times the allowed requests. Here every worker's ``limiter_for(model, limits)``
(``rag.lm.limits``) returns a :class:`SharedLimiter` that asks the one :class:`LimiterActor` for a reservation.
The actor never blocks: it answers "go" (with a handle for ``settle``) or "wait s seconds", and the worker
sleeps on its own side, so one slow worker never stalls the others' answers.

A worker that meets a spent daily quota calls :func:`stop_all`; from then on every reservation raises
``DailyQuotaExhausted`` on every worker, before any further request is sent, and the run stays resumable.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from rag.lm.limits import DailyQuotaExhausted, Limits, RateLimiter, share_limiters

ACTOR_NAME = "sieve-rate-limiter"
WINDOW_S = 60.0  # Groq counts per minute; tests shrink it


class LimiterState:
    """The actor's state, plain Python (also usable without Ray): sliding windows per (model, rpm, tpm)."""

    def __init__(self, window: float = WINDOW_S):
        self.window = window
        self.limiters: dict[tuple[str, int, int], RateLimiter] = {}
        self.handles: dict[int, list[float]] = {}
        self.ids = itertools.count(1)
        self.stopped: str | None = None
        self.granted: dict[str, int] = {}

    def reserve(self, model: str, rpm: int, tpm: int, tokens: int) -> tuple[int | None, float, str | None]:
        """``(handle, 0, None)`` when the request may go now; ``(None, wait_s, None)``; or ``(None, 0, reason)``
        once the quota was reported spent."""
        if self.stopped is not None:
            return None, 0.0, self.stopped
        key = (model, rpm, tpm)
        if key not in self.limiters:
            self.limiters[key] = RateLimiter(rpm, tpm, window=self.window)
        event, wait = self.limiters[key].try_acquire(tokens)
        if event is None:
            return None, wait, None
        handle = next(self.ids)
        self.handles[handle] = event
        self.granted[model] = self.granted.get(model, 0) + 1
        cutoff = time.monotonic() - self.window  # an event older than the window no longer counts: forget it
        for stale in [h for h, ev in self.handles.items() if ev[0] < cutoff]:
            del self.handles[stale]
        return handle, 0.0, None

    def settle(self, handle: int, tokens: int) -> None:
        event = self.handles.pop(handle, None)
        if event is not None:
            event[1] = float(tokens)

    def stop(self, reason: str) -> None:
        self.stopped = self.stopped or reason

    def stats(self) -> dict[str, Any]:
        return {"granted": dict(self.granted), "stopped": self.stopped, "window": self.window}


def limiter_actor(window: float = WINDOW_S) -> Any:
    """The cluster's limiter actor, created on first use (same name, same namespace: every driver shares it)."""
    import ray

    from rag.distributed.cluster import NAMESPACE

    actor_class = ray.remote(num_cpus=0, max_restarts=-1)(LimiterState)
    return actor_class.options(name=ACTOR_NAME, namespace=NAMESPACE, get_if_exists=True,
                               lifetime=None).remote(window)


class SharedLimiter:
    """``acquire``/``settle`` like ``RateLimiter``, answered by the cluster's actor; sleeps here, bounded."""

    def __init__(self, actor: Any, model: str, limits: Limits, *, poll_max: float = 5.0):
        self.actor, self.model, self.limits, self.poll_max = actor, model, limits, poll_max
        self.rpm, self.tpm = limits.rpm, limits.tpm

    def acquire(self, tokens: int, *, max_wait: float = 120.0) -> int:
        import ray

        waited = 0.0
        while True:
            handle, wait, stopped = ray.get(self.actor.reserve.remote(self.model, self.rpm, self.tpm, int(tokens)))
            if stopped is not None:
                raise DailyQuotaExhausted(self.model, f"another worker of this cluster reported: {stopped}")
            if handle is not None:
                return handle
            if waited + wait > max_wait:
                raise TimeoutError(f"cluster rate limiter would wait {waited + wait:.0f}s (> {max_wait:.0f}s) "
                                   f"for {tokens} tokens under {self.rpm} RPM / {self.tpm} TPM")
            step = min(wait, self.poll_max)  # re-ask: a settle may free budget earlier
            time.sleep(step)
            waited += step

    def settle(self, handle: int, tokens: int) -> None:
        self.actor.settle.remote(handle, int(tokens))


def use_cluster_limiter(actor: Any) -> None:
    """In a worker: every hosted model's limiter is the cluster's from now on."""
    share_limiters(lambda model, limits: SharedLimiter(actor, model, limits))


def stop_all(actor: Any, reason: str) -> None:
    """Every worker's next reservation raises ``DailyQuotaExhausted`` (the quota is spent for all of them)."""
    import ray

    ray.get(actor.stop.remote(reason[:300]))
