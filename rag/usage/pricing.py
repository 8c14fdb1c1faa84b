"""List prices per model and the cost of one call.

Prices are USD per million tokens (input, output), from the providers' public price pages
(Groq, checked 2026). Edit ``PRICES`` when a provider changes its list; a model not in the
table has an unknown cost (``None``), never a made-up zero. The embedded model is free.
"""

from __future__ import annotations

from collections.abc import Mapping

# model -> (USD per 1M input tokens, USD per 1M output tokens)
PRICES: dict[str, tuple[float, float]] = {
    "groq/openai/gpt-oss-120b": (0.15, 0.60),
    "groq/openai/gpt-oss-20b": (0.075, 0.30),
    "groq/qwen/qwen3-32b": (0.29, 0.59),
    "groq/llama-3.3-70b-versatile": (0.59, 0.79),
    "groq/llama-3.1-8b-instant": (0.05, 0.08),
    "groq/meta-llama/llama-4-scout-17b-16e-instruct": (0.11, 0.34),
    "groq/moonshotai/kimi-k2-instruct-0905": (1.00, 3.00),
}

FREE_PREFIXES = ("embedded/", "gguf/")


def price_of(model: str) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens for a model spec, 0 for local models, None if unknown."""
    if model.startswith(FREE_PREFIXES):
        return (0.0, 0.0)
    return PRICES.get(model)


def cost_usd(model: str, input_tokens: int | None, output_tokens: int | None) -> float | None:
    """Cost of one call at list price; None when the model or a token count is unknown."""
    price = price_of(model)
    if price is None or input_tokens is None or output_tokens is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


def cost_of_usage(model: str, usage: Mapping[str, object]) -> float | None:
    """Cost from a DSPy usage dict (``prompt_tokens``/``completion_tokens``), as found in
    ``lm.history[i]["usage"]`` or ``dspy.track_usage()`` entries. An empty dict (a cache hit) costs 0."""
    if not usage:
        return 0.0
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return cost_usd(model, prompt if isinstance(prompt, int) else None, completion if isinstance(completion, int) else None)
