"""Groq (and any Groq-compatible server) as a DSPy engine, through the official ``groq`` SDK.

``dspy.LM("groq/openai/gpt-oss-20b", engine=GroqEngine(), async_engine=AsyncGroqEngine(...), num_retries=0)``.

The engine owns the free-tier hardening (``rag.lm.limits``): a per-model rate limiter, bounded
retries with exponential backoff that honours ``retry-after``, a per-attempt timeout, and a
clean stop (``DailyQuotaExhausted``) when the daily quota is spent. Every attempt goes into the
usage ledger (``rag.usage.ledger``) with its cost at list price (``rag.usage.pricing``). DSPy's own
retry loop is switched off for these LMs (``num_retries=0``) so retries are counted once.

Structured output: strict ``json_schema`` on models that enforce it, best-effort ``json_schema``
where Groq accepts schemas, ``json_object`` (JSON mode) elsewhere.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from dspy import lm15
from dspy.lm15 import Request, Response, response_to_events

from rag.errors import ModelError
from rag.lm.limits import (
    DailyQuotaExhausted,
    Limits,
    RetryPolicy,
    daily_quota_message,
    limiter_for,
    limits_for,
    parse_retry_after,
)
from rag.lm.wire import SUPPORTED_PARAMS, ThreadedAsyncEngine, build_response, chat_messages, output_format
from rag.usage.calls import LMCall, emit
from rag.usage.ledger import Ledger
from rag.usage.pricing import cost_usd

log = logging.getLogger(__name__)

# Groq's structured outputs: strict schema enforcement on these, best-effort schema on those.
STRICT_SCHEMA_MODELS = frozenset({"openai/gpt-oss-20b", "openai/gpt-oss-120b"})
SCHEMA_MODELS = frozenset({"moonshotai/kimi-k2-instruct-0905", "meta-llama/llama-4-scout-17b-16e-instruct",
                           "meta-llama/llama-4-maverick-17b-128e-instruct"})

_STATS_LOCK = threading.Lock()
_STATS = {"calls": 0, "attempts": 0, "retries": 0, "waited_s": 0.0, "input_tokens": 0, "output_tokens": 0,
          "cost_usd": 0.0, "parse_failures": 0}


def stats() -> dict[str, float]:
    """Process-wide counters of hosted calls: calls, attempts, retries, seconds waited, tokens, cost, parse failures."""
    with _STATS_LOCK:
        return dict(_STATS)


def _count(**deltas: float) -> None:
    with _STATS_LOCK:
        for key, value in deltas.items():
            _STATS[key] += value


def wire_model(model: str) -> str:
    """``groq/openai/gpt-oss-20b`` -> ``openai/gpt-oss-20b`` (the id Groq's API takes)."""
    return model.removeprefix("groq/")


def response_format_for(model: str, request: Request) -> dict[str, Any] | None:
    """The chat ``response_format`` for this model: strict schema, schema, or JSON mode."""
    fmt = output_format(request)
    if fmt.kind == "text":
        return None
    if fmt.kind == "json_schema" and (model in STRICT_SCHEMA_MODELS or model in SCHEMA_MODELS):
        strict = model in STRICT_SCHEMA_MODELS
        schema = _without_length_bounds(fmt.schema) if strict else fmt.schema
        return {"type": "json_schema", "json_schema": {"name": fmt.name, "schema": schema, "strict": strict}}
    return {"type": "json_object"}


def _without_length_bounds(schema: Any) -> Any:
    """The schema less ``maxLength``/``minLength`` (Sieve's output-length hints for local grammars), which strict
    structured outputs do not accept."""
    if isinstance(schema, dict):
        return {k: _without_length_bounds(v) for k, v in schema.items() if k not in ("maxLength", "minLength")}
    if isinstance(schema, list):
        return [_without_length_bounds(v) for v in schema]
    return schema


class GroqEngine:
    """One logical call = up to ``1 + retry.max_retries`` attempts, each bounded by ``timeout`` seconds."""

    supports_response_schema = True
    supported_params = SUPPORTED_PARAMS

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        rate_limits: Mapping[str, Limits] | None = None,
        rate_limit: bool = True,
        ledger: Ledger | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        import groq

        key = api_key or os.environ.get("GROQ_API_KEY")
        if not key:
            raise ModelError("GROQ_API_KEY is not set; export it or put GROQ_API_KEY=... in a .env file "
                             "(or choose embedded models: SIEVE_<ROLE>_MODEL=embedded)")
        self.base_url = base_url or os.environ.get("GROQ_BASE_URL") or None
        self.timeout = float(timeout)
        self.retry = retry or RetryPolicy()
        self.rate_limits = dict(rate_limits or {})
        self.rate_limit = rate_limit
        self.ledger = ledger if ledger is not None else Ledger()
        self._sleep = sleep
        self._client = groq.Groq(api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=0)
        self._errors = groq

    def __repr__(self) -> str:  # never show the key
        return f"GroqEngine(base_url={self.base_url!r}, timeout={self.timeout}, retry={self.retry})"

    def _body(self, request: Request, model: str) -> dict[str, Any]:
        config = request.config
        body: dict[str, Any] = {"model": model, "messages": chat_messages(request),
                                "temperature": config.temperature if config.temperature is not None else 0.0}
        if config.max_tokens is not None:
            body["max_completion_tokens"] = config.max_tokens
        for name in ("top_p", "seed"):
            if getattr(config, name) is not None:
                body[name] = getattr(config, name)
        if config.stop:
            body["stop"] = list(config.stop)
        fmt = response_format_for(model, request)
        if fmt:
            body["response_format"] = fmt
        return body

    def complete(self, request: Request) -> Response:
        model = wire_model(request.model)
        body = self._body(request, model)
        limiter = limiter_for(model, limits_for(model, self.rate_limits)) if self.rate_limit else None
        estimate = sum(len(m["content"]) for m in body["messages"]) // 4 + (request.config.max_tokens or 256)
        waited, error, call_started = 0.0, None, time.perf_counter()
        for attempt in range(self.retry.max_retries + 1):
            handle = None
            if limiter is not None:
                try:
                    handle = limiter.acquire(estimate, max_wait=self.retry.max_retry_after)
                except TimeoutError as exc:
                    raise lm15.RateLimitError(str(exc), provider="groq") from None
            started = time.perf_counter()
            retry_after = None
            try:
                raw = self._client.chat.completions.with_raw_response.create(**body)
                completion = raw.parse()
            except self._errors.APIStatusError as exc:
                latency = time.perf_counter() - started
                status, headers, text = exc.status_code, dict(exc.response.headers), exc.response.text
                retry_after = parse_retry_after(headers)
                quota = daily_quota_message(status, text, headers)
                if quota is None and status == 429 and retry_after is not None and retry_after > self.retry.max_retry_after:
                    quota = f"retry-after {retry_after:.0f}s exceeds max_retry_after={self.retry.max_retry_after:.0f}s"
                if quota is not None:
                    self.ledger.record(model=request.model, status="quota_exhausted", latency_s=latency)
                    raise DailyQuotaExhausted(request.model, quota) from None
                error = self._status_error(request.model, status, text, retry_after)
                self.ledger.record(model=request.model, latency_s=latency,
                                   status="rate_limited" if status == 429 else "server_error" if status >= 500 else "error")
                if not isinstance(error, (lm15.RateLimitError, lm15.ServerError)):
                    raise error from None
            except self._errors.APITimeoutError:
                self.ledger.record(model=request.model, status="timeout", latency_s=time.perf_counter() - started)
                error = lm15.TimeoutError(f"{request.model}: no response within {self.timeout:g}s", provider="groq")
            except self._errors.APIConnectionError as exc:
                self.ledger.record(model=request.model, status="error", latency_s=time.perf_counter() - started)
                error = lm15.TransportError(f"{request.model}: cannot reach {self.base_url or 'api.groq.com'} ({exc})",
                                            provider="groq")
            else:
                return self._accept(request, completion, raw.headers, handle, limiter,
                                    time.perf_counter() - started, round(time.perf_counter() - call_started, 4),
                                    attempt, waited)
            _count(attempts=1)
            if attempt == self.retry.max_retries:
                break
            wait = self.retry.delay(attempt, retry_after)
            log.info("%s: %s; retry %d/%d in %.1fs", request.model, type(error).__name__, attempt + 1,
                     self.retry.max_retries, wait)
            self._sleep(wait)
            waited += wait
            _count(retries=1, waited_s=wait)
        raise error

    def _status_error(self, model: str, status: int, text: str, retry_after: float | None) -> Exception:
        try:
            detail = json.loads(text).get("error", {}).get("message") or text
        except (ValueError, AttributeError):
            detail = text
        detail = str(detail)[:300]
        kwargs = {"provider": "groq", "status": status, "retry_after": retry_after}
        if status == 429:
            return lm15.RateLimitError(f"{model}: rate limited: {detail}", **kwargs)
        if status >= 500 or status == 498:
            return lm15.ServerError(f"{model}: server error {status}: {detail}", **kwargs)
        if status in (401, 403):
            return lm15.AuthError(f"{model}: the API key was rejected ({status}); check GROQ_API_KEY", **kwargs)
        if status == 413 or "context" in detail.lower() and "length" in detail.lower():
            return lm15.ContextLengthError(f"{model}: prompt too long: {detail}", **kwargs)
        if "json_validate_failed" in text:
            _count(parse_failures=1)
        return lm15.InvalidRequestError(f"{model}: request refused ({status}): {detail}", **kwargs)

    def _accept(self, request, completion, headers, handle, limiter, latency, total, attempt, waited) -> Response:
        choice = completion.choices[0]
        text = choice.message.content or ""
        usage = completion.usage
        inputs = getattr(usage, "prompt_tokens", None)
        outputs = getattr(usage, "completion_tokens", None)
        if limiter is not None and handle is not None and inputs is not None:
            limiter.settle(handle, inputs + (outputs or 0))
        cost = cost_usd(request.model, inputs, outputs)
        self.ledger.record(model=request.model, status="ok", input_tokens=inputs or 0, output_tokens=outputs or 0,
                           cost_usd=cost, latency_s=latency)
        notes = []
        if output_format(request).kind != "text":
            try:
                json.loads(text)
            except ValueError:
                _count(parse_failures=1)
                notes.append("structured output did not parse as JSON")
                log.warning("%s: structured output did not parse as JSON", request.model)
        _count(calls=1, attempts=1, input_tokens=inputs or 0, output_tokens=outputs or 0, cost_usd=cost or 0.0)
        emit(LMCall(request.model, inputs, outputs, cost, total, attempt + 1, tuple(notes)))
        return build_response(
            model=request.model, text=text, response_id=completion.id, input_tokens=inputs, output_tokens=outputs,
            finish_reason=choice.finish_reason or "stop",
            sieve={"backend": "groq", "served_model": completion.model, "latency_s": total,
                   "last_attempt_s": round(latency, 4),
                   "cost_usd": cost, "attempts": attempt + 1, "waited_s": round(waited, 3),
                   "remaining_tokens": headers.get("x-ratelimit-remaining-tokens"), "notes": notes},
        )

    def stream(self, request: Request) -> Iterator[Any]:
        """The complete response as stream events (no token-by-token streaming)."""
        yield from response_to_events(self.complete(request))

    def close(self) -> None:
        self._client.close()

    def dump_state(self) -> dict[str, Any]:
        """Saved with a program: connection settings only, never the key."""
        return {"base_url": self.base_url, "timeout": self.timeout, "max_retries": self.retry.max_retries}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> "GroqEngine":
        return cls(base_url=state.get("base_url"), timeout=state.get("timeout", 60.0),
                   retry=RetryPolicy(max_retries=state.get("max_retries", 4)))


class AsyncGroqEngine(ThreadedAsyncEngine):
    """The async counterpart: the synchronous engine in a worker thread."""

    sync_class = GroqEngine
