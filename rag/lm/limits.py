"""Free-tier hardening for hosted models: rate limits, backoff, quota detection.

- ``FREE_TIER``: Groq's published free-plan limits per model (requests/tokens per minute and
  per day). Override per model with the ``rate_limits`` setting, e.g.
  ``SIEVE_RATE_LIMITS="openai/gpt-oss-20b=30/8000,*=60/12000"`` (``model=RPM/TPM``).
- ``RateLimiter``: a sliding 60-second window per model, shared by every engine in the
  process (limits apply to the whole organisation), that waits before a request would
  exceed RPM or TPM.
- ``RetryPolicy``: bounded retries (``max_retries``) with exponential backoff that honours
  the server's ``retry-after``.
- ``daily_quota_message``: recognises a 429 that means "the daily quota is spent" so the run
  stops with ``DailyQuotaExhausted`` instead of retrying for hours.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dspy.utils.exceptions import LMBillingError

from rag.errors import ConfigError, QuotaExhausted


@dataclass(frozen=True)
class Limits:
    """Requests and tokens per minute; per-day figures are informational (``rag usage``)."""

    rpm: int
    tpm: int
    rpd: int | None = None
    tpd: int | None = None


# Groq free plan, per model and organisation (console.groq.com/docs/rate-limits, 2026).
FREE_TIER: dict[str, Limits] = {
    "openai/gpt-oss-120b": Limits(30, 8_000, 1_000, 200_000),
    "openai/gpt-oss-20b": Limits(30, 8_000, 1_000, 200_000),
    "qwen/qwen3-32b": Limits(60, 6_000, 1_000, 500_000),
    "llama-3.3-70b-versatile": Limits(30, 12_000, 1_000, 100_000),
    "llama-3.1-8b-instant": Limits(30, 6_000, 14_400, 500_000),
    "meta-llama/llama-4-scout-17b-16e-instruct": Limits(30, 30_000, 1_000, 500_000),
}
DEFAULT_LIMITS = Limits(30, 6_000, 1_000, 100_000)


def parse_rate_limits(text: str | None) -> dict[str, Limits]:
    """``"model=RPM/TPM,*=RPM/TPM"`` -> overrides; ``*`` applies to every model not named."""
    out: dict[str, Limits] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        model, sep, value = item.rpartition("=")
        rpm, slash, tpm = value.partition("/")
        try:
            if not sep or not slash or not model.strip():
                raise ValueError
            limits = Limits(int(rpm), int(tpm))
            if limits.rpm < 1 or limits.tpm < 1:
                raise ValueError
        except ValueError:
            raise ConfigError(f"rate_limits: {item!r} is not model=RPM/TPM with positive integers, "
                              "e.g. rate_limits=openai/gpt-oss-20b=30/8000") from None
        out[model.strip()] = limits
    return out


def limits_for(model: str, overrides: Mapping[str, Limits] | None = None) -> Limits:
    """The limits for a provider model id (without the ``groq/`` prefix)."""
    overrides = overrides or {}
    base = FREE_TIER.get(model, DEFAULT_LIMITS)
    chosen = overrides.get(model) or overrides.get("*")
    return Limits(chosen.rpm, chosen.tpm, base.rpd, base.tpd) if chosen else base


class RateLimiter:
    """Sliding-window limiter: ``acquire(tokens)`` blocks until one more request of that size fits."""

    def __init__(self, rpm: int, tpm: int, *, window: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.rpm, self.tpm, self.window = rpm, tpm, window
        self._clock, self._sleep = clock, sleep
        self._events: deque[list[float]] = deque()  # [time, tokens]
        self._lock = threading.Lock()

    def _wait_needed(self, tokens: int, now: float) -> float:
        while self._events and now - self._events[0][0] >= self.window:
            self._events.popleft()
        used = sum(event[1] for event in self._events)
        waits = [0.0]
        if len(self._events) >= self.rpm:
            waits.append(self._events[len(self._events) - self.rpm][0] + self.window - now)
        if self._events and used + tokens > self.tpm:
            # wait until enough old events leave the window for this request to fit
            freed = 0.0
            for when, size in self._events:
                freed += size
                if used - freed + tokens <= self.tpm:
                    waits.append(when + self.window - now)
                    break
            else:
                waits.append(self._events[-1][0] + self.window - now)
        return max(waits)

    def acquire(self, tokens: int, *, max_wait: float = 120.0) -> list[float]:
        """Reserve a request of ``tokens`` (estimated); returns a handle for ``settle``.

        Waits at most ``max_wait`` seconds in total, then raises ``TimeoutError``.
        """
        waited = 0.0
        while True:
            event, wait = self.try_acquire(tokens)
            if event is not None:
                return event
            if waited + wait > max_wait:
                raise TimeoutError(f"rate limiter would wait {waited + wait:.0f}s (> {max_wait:.0f}s) "
                                   f"for {tokens} tokens under {self.rpm} RPM / {self.tpm} TPM")
            self._sleep(wait)
            waited += wait

    def try_acquire(self, tokens: int) -> tuple[list[float] | None, float]:
        """Reserve now if a request of ``tokens`` fits: ``(handle, 0)``; else ``(None, seconds until it may)``."""
        with self._lock:
            now = self._clock()
            wait = self._wait_needed(tokens, now)
            if wait <= 0:
                event = [now, float(tokens)]
                self._events.append(event)
                return event, 0.0
            return None, wait

    def settle(self, handle: list[float], tokens: int) -> None:
        """Replace a reservation's estimate with the tokens the provider actually counted."""
        with self._lock:
            handle[1] = float(tokens)


_LIMITERS: dict[tuple[str, int, int], RateLimiter] = {}
_LIMITERS_LOCK = threading.Lock()
# Where limiters come from: None = this process's own; rag.distributed.limiter installs one shared by a cluster.
_SHARED: list[Callable[[str, Limits], RateLimiter] | None] = [None]


def share_limiters(factory: Callable[[str, Limits], RateLimiter] | None) -> None:
    """Make :func:`limiter_for` return ``factory(model, limits)`` (an object with ``acquire``/``settle``) from now
    on in this process, e.g. a limiter shared by every worker of a cluster; None restores per-process limiters."""
    with _LIMITERS_LOCK:
        _SHARED[0] = factory
        _LIMITERS.clear()


def limiter_for(model: str, limits: Limits) -> RateLimiter:
    """The process-wide limiter of one model (shared across engines and threads; across a cluster when
    :func:`share_limiters` installed a shared one)."""
    key = (model, limits.rpm, limits.tpm)
    with _LIMITERS_LOCK:
        if key not in _LIMITERS:
            _LIMITERS[key] = _SHARED[0](model, limits) if _SHARED[0] else RateLimiter(limits.rpm, limits.tpm)
        return _LIMITERS[key]


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``max_retries`` retries after the first attempt; waits grow ``base_delay * 2**n``
    (capped at ``max_delay``, +-``jitter``) unless the server sends ``retry-after``, which is
    honoured as given. A ``retry-after`` beyond ``max_retry_after`` means the quota will not come
    back soon: the run stops with ``DailyQuotaExhausted``."""

    max_retries: int = 4
    base_delay: float = 1.0
    max_delay: float = 30.0
    jitter: float = 0.1
    max_retry_after: float = 120.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None and retry_after >= 0:
            return float(retry_after)
        backoff = min(self.base_delay * 2 ** attempt, self.max_delay)
        return backoff * (1 + random.uniform(-self.jitter, self.jitter))


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after`` (or ``retry-after-ms``); None when absent or not a number."""
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        if "retry-after-ms" in lower:
            return float(lower["retry-after-ms"]) / 1000
        if "retry-after" in lower:
            return float(lower["retry-after"])
    except ValueError:
        return None
    return None


DAILY_MARKERS = ("per day", "(tpd)", "(rpd)", "daily", "insufficient_quota", "quota exceeded")


def daily_quota_message(status: int, body: str, headers: Mapping[str, str]) -> str | None:
    """The provider's words when a 429 means the daily quota is spent, else None."""
    if status != 429:
        return None
    text = body.lower()
    if any(marker in text for marker in DAILY_MARKERS):
        return body.strip()[:300]
    lower = {k.lower(): v for k, v in headers.items()}
    if lower.get("x-ratelimit-remaining-requests") == "0":  # Groq counts requests per day here
        return "x-ratelimit-remaining-requests is 0 (daily request quota spent)"
    return None


class DailyQuotaExhausted(QuotaExhausted, LMBillingError):
    """The provider's daily quota is spent. Both a Sieve ``QuotaExhausted`` (the CLI prints one
    clean line) and a DSPy ``LMBillingError`` (DSPy neither wraps nor retries it)."""

    def __init__(self, model: str, detail: str):
        super().__init__(
            f"daily quota for {model} is spent ({detail}). Stopped cleanly: finished calls are cached and in "
            "the usage ledger (`rag usage`); re-run the same command after the quota resets to resume, or set "
            "<role>_model to another model (e.g. SIEVE_ANSWERER_MODEL=embedded)."
        )
