"""GroqEngine against real loopback servers: llama-cpp-python's OpenAI-compatible server
(the same SmolLM2 GGUF), reached through a scripted proxy that injects 429s, 5xx, slow
answers and a spent daily quota. Nothing here touches the internet."""

import json
import sqlite3
import time

import dspy
import pytest

from rag.errors import Cancelled, QuotaExhausted
from rag.lm import groq as groq_module
from rag.lm import streaming
from rag.lm.groq import AsyncGroqEngine, GroqEngine
from rag.lm.limits import RetryPolicy
from rag.lm.local import find_smollm2_gguf
from rag.usage.calls import LMCall, record_calls
from rag.usage.ledger import Ledger
from tests.lm_loopback import Fault, FaultProxy, LlamaServer, groq_error

SLOW = pytest.mark.slow  # the tests that start the loopback server; the pure-function ones stay in the quick suite


@pytest.fixture(scope="session")
def llama_server():
    server = LlamaServer(find_smollm2_gguf())
    yield server
    server.stop()


@pytest.fixture(scope="session")
def proxy(llama_server):
    proxy = FaultProxy(llama_server.url)
    yield proxy
    proxy.stop()


class Verdict(dspy.Signature):
    """Decide whether the passage answers the question."""

    question: str = dspy.InputField()
    passage: str = dspy.InputField()
    relevant: bool = dspy.OutputField()
    keywords: list[str] = dspy.OutputField(desc="up to three words from the passage")


def make_lm(proxy, tmp_path, model="groq/openai/gpt-oss-20b", **engine_kwargs):
    engine_kwargs.setdefault("retry", RetryPolicy(max_retries=3, base_delay=0.05, max_delay=0.2))
    engine = GroqEngine(api_key="test-key-not-real", base_url=proxy.url, ledger=Ledger(tmp_path / "usage.sqlite"),
                        **engine_kwargs)
    lm = dspy.LM(model, engine=engine, async_engine=AsyncGroqEngine(engine), cache=False, temperature=0.0,
                 max_tokens=96, num_retries=0)
    return lm, engine


def ask(lm, question="Who wrote Hamlet?", passage="Hamlet is a tragedy written by William Shakespeare."):
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return dspy.Predict(Verdict)(question=question, passage=passage)


@SLOW
def test_typed_call_through_real_server(proxy, tmp_path):
    proxy.reset()
    lm, engine = make_lm(proxy, tmp_path)
    result = ask(lm)
    assert isinstance(result.relevant, bool)
    assert isinstance(result.keywords, list) and all(isinstance(k, str) for k in result.keywords)
    assert proxy.requests == ["/openai/v1/chat/completions"]
    entry = lm.history[-1]
    assert entry["usage"]["prompt_tokens"] > 50 and entry["usage"]["completion_tokens"] > 0
    sieve = entry["response"].provider_data["sieve"]
    assert sieve["backend"] == "groq" and sieve["attempts"] == 1 and sieve["latency_s"] > 0
    assert sieve["cost_usd"] == pytest.approx(
        (entry["usage"]["prompt_tokens"] * 0.075 + entry["usage"]["completion_tokens"] * 0.30) / 1e6)
    assert LMCall.from_history(entry).cost_usd == sieve["cost_usd"]
    [row] = engine.ledger.daily()
    assert (row.model, row.calls, row.failed, row.input_tokens) == (
        "groq/openai/gpt-oss-20b", 1, 0, entry["usage"]["prompt_tokens"])


@SLOW
def test_async_path(proxy, tmp_path):
    import asyncio

    proxy.reset()
    lm, _ = make_lm(proxy, tmp_path)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        result = asyncio.run(dspy.Predict(Verdict).acall(question="Is the sky green?", passage="The sky is blue."))
    assert isinstance(result.relevant, bool)
    assert len(proxy.requests) == 1


def test_structured_output_mode_per_model():
    from dspy.lm15 import Config, Message, Request

    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    request = Request(model="x", messages=(Message.user("hi"),),
                      config=Config(response_format={"type": "json_schema", "schema": schema, "name": "Out"}))
    strict = groq_module.response_format_for("openai/gpt-oss-20b", request)
    assert strict == {"type": "json_schema", "json_schema": {"name": "Out", "schema": schema, "strict": True}}
    assert groq_module.response_format_for("meta-llama/llama-4-scout-17b-16e-instruct", request)["json_schema"][
        "strict"] is False
    assert groq_module.response_format_for("qwen/qwen3-32b", request) == {"type": "json_object"}
    assert groq_module.response_format_for("qwen/qwen3-32b", Request(model="x", messages=(Message.user("hi"),))) is None


@SLOW
def test_429_retry_after_is_honoured(proxy, tmp_path):
    limited = Fault(429, {"retry-after": "1"}, groq_error("Rate limit reached on tokens per minute (TPM)"))
    proxy.reset(limited, limited)
    lm, engine = make_lm(proxy, tmp_path)
    before = groq_module.stats()
    start = time.perf_counter()
    with record_calls() as calls:
        result = ask(lm, question="Who wrote Macbeth?")
    elapsed = time.perf_counter() - start
    assert isinstance(result.relevant, bool)
    assert elapsed >= 2.0  # two waits of retry-after: 1
    assert len(proxy.requests) == 3
    [call] = calls
    assert call.attempts == 3 and 2.0 <= call.latency_s <= elapsed and call.input_tokens > 50
    after = groq_module.stats()
    assert after["retries"] - before["retries"] == 2 and after["waited_s"] - before["waited_s"] == pytest.approx(2.0)
    [row] = engine.ledger.daily()
    assert (row.calls, row.failed) == (1, 2)


@SLOW
def test_server_errors_retry_a_bounded_number_of_times(proxy, tmp_path):
    proxy.reset(*[Fault(503, {}, '{"error":{"message":"over capacity"}}')] * 10)
    lm, engine = make_lm(proxy, tmp_path, retry=RetryPolicy(max_retries=2, base_delay=0.1, jitter=0.0))
    start = time.perf_counter()
    with pytest.raises(dspy.utils.exceptions.LMServerError, match="over capacity"):
        ask(lm, question="Who wrote Othello?")
    assert len(proxy.requests) == 3  # 1 attempt + max_retries=2, then a clean error
    assert time.perf_counter() - start >= 0.3  # backoff 0.1 + 0.2
    [row] = engine.ledger.daily()
    assert (row.calls, row.failed) == (0, 3)


@SLOW
def test_slow_server_times_out_and_retries_are_bounded(proxy, tmp_path):
    proxy.reset(*[Fault(200, {}, "{}", delay=3.0)] * 3)
    lm, _ = make_lm(proxy, tmp_path, timeout=0.5, retry=RetryPolicy(max_retries=1, base_delay=0.05))
    start = time.perf_counter()
    with pytest.raises(dspy.utils.exceptions.LMTimeoutError):
        ask(lm, question="Who wrote King Lear?")
    assert len(proxy.requests) == 2
    assert time.perf_counter() - start < 2.5  # never waited for the 3 s answers


@SLOW
def test_daily_quota_stops_cleanly_and_resumes_from_cache(proxy, tmp_path):
    from rag.config import Settings
    from rag.lm.configure import configure_dspy

    old_cache = dspy.cache
    configure_dspy(Settings(cache_dir=tmp_path / "cache"), adapter=False)
    try:
        proxy.reset()
        engine = GroqEngine(api_key="test-key-not-real", base_url=proxy.url, ledger=Ledger(tmp_path / "u.sqlite"),
                            retry=RetryPolicy(max_retries=3, base_delay=0.05))
        lm = dspy.LM("groq/openai/gpt-oss-20b", engine=engine, cache=True, temperature=0.0, max_tokens=96,
                     num_retries=0)
        first = ask(lm, question="Who wrote The Tempest?")  # done before the quota runs out
        spent = Fault(429, {"retry-after": "3600"},
                      groq_error("Rate limit reached for model `openai/gpt-oss-20b` on tokens per day (TPD): "
                                 "Limit 200000, Used 199990, Requested 700."))
        proxy.reset(spent, spent, spent)
        start = time.perf_counter()
        with pytest.raises(QuotaExhausted, match="daily quota .* is spent"):
            ask(lm, question="Who wrote Twelfth Night?")
        assert time.perf_counter() - start < 1.0 and len(proxy.requests) == 1  # no retries, no waiting
        rows = engine.ledger.daily()
        assert [(r.calls, r.failed) for r in rows] == [(1, 1)]  # the finished call is still on the ledger
        proxy.reset(spent)
        again = ask(lm, question="Who wrote The Tempest?")  # resumes: served from DSPy's cache
        assert again.relevant == first.relevant and proxy.requests == []
    finally:
        dspy.cache = old_cache


def test_missing_key_is_a_clear_error(monkeypatch):
    from rag.errors import ModelError

    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    with pytest.raises(ModelError, match="GROQ_API_KEY is not set"):
        GroqEngine()


# ---------------------------------------------------------------- streaming: a rag.lm.streaming listener registered
STREAM = {"Content-Type": "text/event-stream"}
USAGE = {"prompt_tokens": 123, "completion_tokens": 3, "total_tokens": 126}
STORY = "Write a long story about a lighthouse keeper and his cat, at least 300 words."


def chunk(content=None, finish=None, *, choices=True, **extra):
    """One chat.completion.chunk as an OpenAI-compatible server streams it."""
    delta = {"content": content} if content is not None else {}
    return {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": "openai/gpt-oss-20b",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else [], **extra}


def sse(*chunks, done=True) -> str:
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + ("data: [DONE]\n\n" if done else "")


def statuses(engine) -> list[str]:
    with sqlite3.connect(engine.ledger.path) as conn:
        return [status for (status,) in conn.execute("SELECT status FROM calls ORDER BY ts")]


@SLOW
def test_a_streamed_call_replies_as_the_plain_call_and_passes_its_text_on_as_it_comes(proxy, tmp_path):
    """The same typed call without a listener (a plain request, as always) and with one (a stream from the real
    llama-cpp-python server): the same reply, whose pieces reached the listener; that server sends no usage with a
    stream, so it is estimated, and the response says so."""
    proxy.reset()
    lm, engine = make_lm(proxy, tmp_path)
    plain = ask(lm)
    plain_entry = lm.history[-1]
    pieces, calls = [], []
    with streaming.listen(pieces.append, lambda: calls.append(1)):
        streamed = ask(lm)
    entry = lm.history[-1]
    assert (streamed.relevant, streamed.keywords) == (plain.relevant, plain.keywords)
    text = entry["response"].message.text
    assert text == plain_entry["response"].message.text == "".join(pieces) and len(pieces) > 3 and calls == [1]
    assert "stream" not in proxy.bodies[0] and "stream_options" not in proxy.bodies[0]
    assert proxy.bodies[1]["stream"] is True and proxy.bodies[1]["stream_options"] == {"include_usage": True}
    sieve = entry["response"].provider_data["sieve"]
    assert sieve["streamed"] is True and "streamed" not in plain_entry["response"].provider_data["sieve"]
    assert [n for n in sieve["notes"] if n.startswith("usage estimated")]
    assert not plain_entry["response"].provider_data["sieve"]["notes"]
    assert entry["usage"]["completion_tokens"] == len(pieces) and entry["usage"]["prompt_tokens"] > 50
    assert (sieve["attempts"], statuses(engine)) == (1, ["ok", "ok"])


@SLOW
@pytest.mark.parametrize("where", ["usage", "x_groq"])
def test_a_streams_usage_is_read_from_its_last_chunk(proxy, tmp_path, where):
    """A server that reports usage at the end of its stream: in a last chunk of its own (``stream_options``
    include_usage, OpenAI's way) or in the finishing chunk's ``x_groq`` (Groq's): those counts are the call's."""
    ending = ([chunk(finish="stop"), chunk(choices=False, usage=USAGE)] if where == "usage"
              else [chunk(finish="stop", x_groq={"id": "req_scripted", "usage": USAGE})])
    proxy.reset(Fault(200, STREAM, sse(chunk("Hel"), chunk("lo"), chunk("!"), *ending)))
    lm, engine = make_lm(proxy, tmp_path)
    pieces = []
    with streaming.listen(pieces.append):
        assert lm("Say hello.") == ["Hello!"]
    entry = lm.history[-1]
    assert pieces == ["Hel", "lo", "!"]
    assert (entry["usage"]["prompt_tokens"], entry["usage"]["completion_tokens"]) == (123, 3)
    assert entry["response"].provider_data["sieve"]["notes"] == []
    [row] = engine.ledger.daily()
    assert (row.calls, row.input_tokens) == (1, 123)


@SLOW
def test_a_stream_that_breaks_is_retried_and_its_text_starts_over(proxy, tmp_path):
    """A 503 before the stream begins (retried, as without a listener); then a stream that ends after two pieces, with
    no finish and no [DONE] (a dropped connection): a failed attempt, retried as any other, against the real server;
    the listener hears a new call start, and the pieces after it join to the reply."""
    proxy.reset(Fault(503, {}, '{"error":{"message":"over capacity"}}'),
                Fault(200, STREAM, sse(chunk("Half"), chunk(" a reply"), done=False)))
    lm, engine = make_lm(proxy, tmp_path)
    heard = []
    with streaming.listen(heard.append, lambda: heard.append(None)):
        [reply] = lm("Say hello in five words.")
    assert heard[:3] == [None, "Half", " a reply"] and heard.count(None) == 2
    assert "".join(heard[heard.index(None, 1) + 1:]) == reply and reply
    assert lm.history[-1]["response"].provider_data["sieve"]["attempts"] == 3
    assert statuses(engine) == ["server_error", "error", "ok"]


@SLOW
def test_a_cancelled_stream_is_closed_at_its_next_piece_and_the_engine_goes_on(proxy, tmp_path):
    """A long generation (up to 300 tokens) from the real server, stopped by its caller after 3 pieces: the stream is
    closed at the next piece, Cancelled raised within a bound, the attempt on the ledger as cancelled; a call stopped
    before it began sends nothing; the next call is answered."""
    proxy.reset()
    lm, engine = make_lm(proxy, tmp_path)
    pieces, stopped_at = [], []

    def on_text(piece):
        pieces.append(piece)
        if len(pieces) == 3:
            stopped_at.append(time.perf_counter())

    with streaming.listen(on_text, cancelled=lambda: len(pieces) >= 3), pytest.raises(Cancelled, match="stopped"):
        lm(STORY, max_tokens=300)
    assert time.perf_counter() - stopped_at[0] < 2.0 and len(pieces) == 3
    assert statuses(engine) == ["cancelled"] and len(lm.history) == 0
    with streaming.listen(pieces.append, cancelled=lambda: True), pytest.raises(Cancelled):
        lm("Say hello.")
    assert len(proxy.requests) == 1  # the stopped call sent nothing
    [reply] = lm("Say hello.")
    assert reply and statuses(engine) == ["cancelled", "ok"]
