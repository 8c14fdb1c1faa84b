"""Measure one LM call of a DSPy predictor: latency, tokens, cost, model, cache hit.

Each call runs against a private ``lm.copy()`` (the model handle is shared, the history is not), so the
measurement is exact even when the evaluation harness runs items in parallel threads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import dspy


@dataclass
class CallStats:
    latency_ms: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    model: str | None = None
    cached: bool = False
    calls: int = 0
    notes: list[str] = field(default_factory=list)  # the engine's notes: context cut, output cut or unparsable


def _usage(entry: dict[str, Any]) -> tuple[int, int]:
    usage = entry.get("usage") or {}
    if not isinstance(usage, dict):
        usage = getattr(usage, "__dict__", {}) or {}
    tokens_in = usage.get("prompt_tokens", usage.get("input_tokens")) or 0
    tokens_out = usage.get("completion_tokens", usage.get("output_tokens")) or 0
    return int(tokens_in), int(tokens_out)


def is_cache_hit(entry: dict[str, Any]) -> bool:
    """DSPy 3.4 marks legacy responses with ``cache_hit``; engine-backed calls served from the cache come back
    with an empty usage dict instead (a real call always reports its token counts)."""
    if getattr(entry.get("response"), "cache_hit", False):
        return True
    usage = entry.get("usage")
    return isinstance(usage, dict) and not usage


def metered_call(predictor: dspy.Module, lm: dspy.BaseLM | None, **inputs: Any) -> tuple[dspy.Prediction, CallStats]:
    """Call ``predictor(**inputs)`` with ``lm`` (or the configured LM) and measure what the call cost."""
    base = lm or dspy.settings.lm
    if base is None:
        raise RuntimeError("No language model configured: call rag.lm.configure_dspy(settings) at the entry point")
    local = base.copy()
    start = time.perf_counter()
    with dspy.context(lm=local):
        prediction = predictor(**inputs)
    stats = CallStats(latency_ms=(time.perf_counter() - start) * 1000, model=getattr(base, "model", None))
    for entry in local.history:
        hit = is_cache_hit(entry)
        tokens_in, tokens_out = _usage(entry)
        stats.tokens_in += tokens_in
        stats.tokens_out += tokens_out
        stats.cost += 0.0 if hit else float(entry.get("cost") or 0.0)
        stats.cached = stats.cached or hit
        stats.calls += 1
        sieve = (getattr(entry.get("response"), "provider_data", None) or {}).get("sieve") or {}
        stats.notes.extend(str(n) for n in sieve.get("notes") or ())
    return prediction, stats
