"""Rate limiter, retry policy, quota detection, pricing and the SQLite ledger (no network)."""

import time

import pytest

from rag.errors import ConfigError, QuotaExhausted
from rag.lm.limits import (
    FREE_TIER,
    DailyQuotaExhausted,
    RateLimiter,
    RetryPolicy,
    daily_quota_message,
    limits_for,
    parse_rate_limits,
    parse_retry_after,
)
from rag.usage.ledger import Ledger
from rag.usage.pricing import cost_of_usage, cost_usd


def test_limiter_waits_for_requests_per_window():
    limiter = RateLimiter(rpm=2, tpm=10_000, window=0.4)
    start = time.perf_counter()
    limiter.acquire(1)
    limiter.acquire(1)
    assert time.perf_counter() - start < 0.2
    limiter.acquire(1)  # third request must wait for the first to leave the window
    assert time.perf_counter() - start >= 0.35


def test_limiter_waits_for_tokens_and_settles_to_actuals():
    limiter = RateLimiter(rpm=100, tpm=100, window=0.4)
    handle = limiter.acquire(90)
    limiter.settle(handle, 10)  # the provider counted fewer tokens than estimated
    start = time.perf_counter()
    limiter.acquire(80)
    assert time.perf_counter() - start < 0.2
    limiter.acquire(60)  # 10 + 80 + 60 > 100: waits for a window slide
    assert time.perf_counter() - start >= 0.35
    with pytest.raises(TimeoutError, match="rate limiter would wait"):
        limiter.acquire(100, max_wait=0.05)


def test_retry_policy_honours_retry_after_and_grows_exponentially():
    policy = RetryPolicy(max_retries=5, base_delay=1.0, max_delay=8.0, jitter=0.0)
    assert policy.delay(0, retry_after=7.5) == 7.5
    assert [policy.delay(n) for n in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None


def test_daily_quota_detection():
    body = ('{"error":{"message":"Rate limit reached for model `openai/gpt-oss-20b` on tokens per day (TPD): '
            'Limit 200000, Used 199900, Requested 900.","type":"tokens","code":"rate_limit_exceeded"}}')
    assert "tokens per day" in daily_quota_message(429, body, {})
    assert daily_quota_message(429, '{"error":{"message":"tokens per minute (TPM)"}}', {}) is None
    assert daily_quota_message(429, "{}", {"x-ratelimit-remaining-requests": "0"})
    assert daily_quota_message(500, body, {}) is None
    exc = DailyQuotaExhausted("groq/openai/gpt-oss-20b", "TPD")
    assert isinstance(exc, QuotaExhausted) and "resume" in str(exc)


def test_rate_limit_config_parsing():
    parsed = parse_rate_limits("openai/gpt-oss-20b=10/2000, *=5/1000")
    assert limits_for("openai/gpt-oss-20b", parsed).rpm == 10
    assert limits_for("qwen/qwen3-32b", parsed).tpm == 1000
    assert limits_for("qwen/qwen3-32b").tpm == FREE_TIER["qwen/qwen3-32b"].tpm
    with pytest.raises(ConfigError, match="model=RPM/TPM"):
        parse_rate_limits("openai/gpt-oss-20b=fast")


def test_pricing_table():
    assert cost_usd("groq/openai/gpt-oss-120b", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert cost_usd("embedded/SmolLM2", 500, 50) == 0.0
    assert cost_usd("groq/unknown-model", 10, 10) is None
    assert cost_of_usage("groq/openai/gpt-oss-20b", {"prompt_tokens": 2000, "completion_tokens": 100}) == pytest.approx(0.00018)
    assert cost_of_usage("groq/openai/gpt-oss-20b", {}) == 0.0  # a cache hit


def test_ledger_totals_per_day_and_model(tmp_path):
    ledger = Ledger(tmp_path / "usage.sqlite")
    assert ledger.daily() == []
    ledger.record(model="groq/a", status="ok", input_tokens=100, output_tokens=10, cost_usd=0.01, latency_s=0.2)
    ledger.record(model="groq/a", status="ok", input_tokens=50, output_tokens=5, cost_usd=0.02, latency_s=0.1)
    ledger.record(model="groq/a", status="rate_limited")
    ledger.record(model="groq/b", status="quota_exhausted")
    rows = {r.model: r for r in ledger.daily()}
    assert (rows["groq/a"].calls, rows["groq/a"].failed, rows["groq/a"].input_tokens) == (2, 1, 150)
    assert rows["groq/a"].cost_usd == pytest.approx(0.03)
    assert (rows["groq/b"].calls, rows["groq/b"].failed) == (0, 1)
