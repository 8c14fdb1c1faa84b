"""Groq (and any Groq-compatible server) as a DSPy engine, through the official ``groq`` SDK.

``dspy.LM("groq/openai/gpt-oss-20b", engine=GroqEngine(), async_engine=AsyncGroqEngine(...), num_retries=0)``.

The engine owns the free-tier hardening (``rag.lm.limits``): a per-model rate limiter, bounded
retries with exponential backoff that honours ``retry-after``, a per-attempt timeout, and a
clean stop (``DailyQuotaExhausted``) when the daily quota is spent. Every attempt goes into the
usage ledger (``rag.usage.ledger``) with its cost at list price (``rag.usage.pricing``). DSPy's own
retry loop is switched off for these LMs (``num_retries=0``) so retries are counted once.

Structured output: strict ``json_schema`` on models that enforce it, best-effort ``json_schema``
where Groq accepts schemas, ``json_object`` (JSON mode) elsewhere.

Streaming: inside ``rag.lm.streaming.listen(on_text, ...)`` the call asks for a stream (``stream=True`` with
``stream_options={"include_usage": true}``) and passes each piece of text to ``on_text`` as it arrives; the reply,
its retries, ledger rows and response are those of the call without a listener. Usage comes from the stream's last
chunk (``usage``, or Groq's ``x_groq.usage``); a server that sends none (llama-cpp-python's) gets its usage estimated
(4 characters a token and 4 tokens a message for the prompt, one token per streamed piece), said in the response's
notes. A stream that breaks, stalls past ``timeout`` or ends before its reply is retried as a failed attempt is (the
listener's ``on_call`` starts the text over). A listener's ``cancelled`` check is asked at every piece: once true the
stream is closed, the attempt goes to the ledger as ``cancelled`` and ``rag.errors.Cancelled`` is raised. Without a
listener the call is the plain request/response one, exactly as before.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dspy import lm15
from dspy.lm15 import Request, Response, response_to_events

from rag.errors import Cancelled, ModelError
from rag.lm import streaming
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


@dataclass
class _Reply:
    """What one successful attempt returned, streamed or whole."""

    text: str
    finish_reason: str | None
    input_tokens: int | None
    output_tokens: int | None
    response_id: str | None
    served_model: str | None
    notes: list[str] = field(default_factory=list)
    streamed: bool = False

    @classmethod
    def whole(cls, completion: Any) -> "_Reply":
        choice, usage = completion.choices[0], completion.usage
        return cls(choice.message.content or "", choice.finish_reason, getattr(usage, "prompt_tokens", None),
                   getattr(usage, "completion_tokens", None), completion.id, completion.model)


class _StreamFailed(Exception):
    """A stream that broke after it began: ``error`` (an lm15 error, retried like any other), ``status`` for the
    ledger."""

    def __init__(self, status: str, error: Exception) -> None:
        super().__init__(str(error))
        self.status, self.error = status, error


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
        self._told_no_usage = False  # the warning that a server's stream carries no usage, once per engine

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
        listener = streaming.current()  # streamed only for a listener: without one, the plain call as always
        limiter = limiter_for(model, limits_for(model, self.rate_limits)) if self.rate_limit else None
        estimate = sum(len(m["content"]) for m in body["messages"]) // 4 + (request.config.max_tokens or 256)
        waited, error, call_started = 0.0, None, time.perf_counter()
        for attempt in range(self.retry.max_retries + 1):
            streaming.raise_if_cancelled(listener, request.model)
            handle = None
            if limiter is not None:
                try:
                    handle = limiter.acquire(estimate, max_wait=self.retry.max_retry_after)
                except TimeoutError as exc:
                    raise lm15.RateLimitError(str(exc), provider="groq") from None
            started = time.perf_counter()
            retry_after = None
            try:
                if listener is None:
                    raw = self._client.chat.completions.with_raw_response.create(**body)
                    reply = _Reply.whole(raw.parse())
                else:
                    raw = self._client.chat.completions.with_raw_response.create(
                        **body, stream=True, extra_body={"stream_options": {"include_usage": True}})
                    reply = self._read_stream(request.model, body, raw.parse(), listener, started)
            except Cancelled:
                self.ledger.record(model=request.model, status="cancelled", latency_s=time.perf_counter() - started)
                raise
            except _StreamFailed as exc:
                self.ledger.record(model=request.model, status=exc.status, latency_s=time.perf_counter() - started)
                error = exc.error
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
                return self._accept(request, reply, raw.headers, handle, limiter,
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

    def _read_stream(self, model: str, body: dict[str, Any], stream: Any, listener: streaming.Listener,
                     started: float) -> _Reply:
        """The reply of a streamed attempt, each piece of its text passed to ``listener`` as it arrives (``on_call``
        first: an attempt's text starts over). A listener that raises is told nothing more; the call goes on. The
        ``cancelled`` check is asked at every chunk: once true the response is closed and ``Cancelled`` raised. A
        stream that breaks, stalls past ``timeout`` or ends before its reply did raises :class:`_StreamFailed`."""
        import httpx

        deaf = False

        def tell(call: Callable[..., None], *args: Any) -> None:
            nonlocal deaf
            if deaf:
                return
            try:
                call(*args)
            except Exception:  # noqa: BLE001 - a listener's fault must not cost the answer
                deaf = True
                log.warning("%s: the text listener failed; it is told nothing more", model, exc_info=True)

        if listener.on_call is not None:
            tell(listener.on_call)
        parts: list[str] = []
        reply = _Reply("", None, None, None, None, None, streamed=True)
        usage = None
        try:
            for chunk in stream:
                if listener.cancel_requested():
                    raise Cancelled(f"{model}: the streamed reply was stopped by the caller")
                if time.perf_counter() - started > self.timeout:
                    raise _StreamFailed("timeout", lm15.TimeoutError(
                        f"{model}: the streamed reply took more than {self.timeout:g}s", provider="groq"))
                extra = getattr(chunk, "x_groq", None)
                if extra is not None and getattr(extra, "error", None):
                    raise _StreamFailed("server_error", lm15.ServerError(
                        f"{model}: the stream stopped early: {extra.error}", provider="groq"))
                reply.response_id = reply.response_id or chunk.id
                reply.served_model = chunk.model or reply.served_model
                usage = chunk.usage or getattr(extra, "usage", None) or usage
                for choice in chunk.choices:
                    if choice.index != 0:
                        continue
                    piece = choice.delta.content if choice.delta is not None else None
                    if piece:
                        parts.append(piece)
                        tell(listener.on_text, piece)
                    reply.finish_reason = choice.finish_reason or reply.finish_reason
        except self._errors.APIError as exc:  # an error event in the stream
            raise _StreamFailed("server_error", lm15.ServerError(f"{model}: the stream failed: {exc}",
                                                                 provider="groq")) from None
        except httpx.TimeoutException:
            raise _StreamFailed("timeout", lm15.TimeoutError(
                f"{model}: the stream sent nothing for {self.timeout:g}s", provider="groq")) from None
        except httpx.TransportError as exc:
            raise _StreamFailed("error", lm15.TransportError(f"{model}: the stream broke ({exc})",
                                                             provider="groq")) from None
        finally:
            stream.close()
        if reply.finish_reason is None:
            raise _StreamFailed("error", lm15.TransportError(f"{model}: the stream ended before the reply did",
                                                             provider="groq"))
        reply.text = "".join(parts)
        if usage is not None:
            reply.input_tokens = getattr(usage, "prompt_tokens", None)
            reply.output_tokens = getattr(usage, "completion_tokens", None)
        else:  # llama-cpp-python's server, for one, sends none: estimated, and said so
            reply.input_tokens = sum(len(m["content"]) // 4 + 4 for m in body["messages"]) + 3
            reply.output_tokens = len(parts)
            reply.notes.append("usage estimated: the server's stream carried none (4 characters a token and 4 tokens a "
                               "message for the prompt, one token per streamed piece)")
            if not self._told_no_usage:
                self._told_no_usage = True
                log.warning("%s: the server's stream carries no usage; tokens and cost are estimated", model)
        return reply

    def _accept(self, request, reply: _Reply, headers, handle, limiter, latency, total, attempt, waited) -> Response:
        text = reply.text
        inputs, outputs = reply.input_tokens, reply.output_tokens
        if limiter is not None and handle is not None and inputs is not None:
            limiter.settle(handle, inputs + (outputs or 0))
        cost = cost_usd(request.model, inputs, outputs)
        self.ledger.record(model=request.model, status="ok", input_tokens=inputs or 0, output_tokens=outputs or 0,
                           cost_usd=cost, latency_s=latency)
        notes = list(reply.notes)
        if output_format(request).kind != "text":
            try:
                json.loads(text)
            except ValueError:
                _count(parse_failures=1)
                notes.append("structured output did not parse as JSON")
                log.warning("%s: structured output did not parse as JSON", request.model)
        _count(calls=1, attempts=1, input_tokens=inputs or 0, output_tokens=outputs or 0, cost_usd=cost or 0.0)
        emit(LMCall(request.model, inputs, outputs, cost, total, attempt + 1, tuple(notes)))
        sieve = {"backend": "groq", "served_model": reply.served_model, "latency_s": total,
                 "last_attempt_s": round(latency, 4),
                 "cost_usd": cost, "attempts": attempt + 1, "waited_s": round(waited, 3),
                 "remaining_tokens": headers.get("x-ratelimit-remaining-tokens"), "notes": notes}
        if reply.streamed:
            sieve["streamed"] = True
        return build_response(
            model=request.model, text=text, response_id=reply.response_id, input_tokens=inputs, output_tokens=outputs,
            finish_reason=reply.finish_reason or "stop", sieve=sieve,
        )

    def stream(self, request: Request) -> Iterator[Any]:
        """The complete response as DSPy's stream events (the text as it arrives goes to a ``rag.lm.streaming``
        listener, when one is registered)."""
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
