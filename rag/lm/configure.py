"""Which language model plays which role, as ready ``dspy.LM`` objects.

Model specs (``Settings.<role>_model``, env ``SIEVE_<ROLE>_MODEL``, config file, or CLI):

- ``embedded``: ``Settings.embedded_model`` (default Qwen2.5-Coder-1.5B-Instruct, shipped in PyPI wheels; see
  ``rag.lm.models``) or ``Settings.gguf_path``, in-process
- ``gguf:/path/model.gguf``: any GGUF file, in-process
- ``groq/<model>``: Groq through the official SDK, with rate limits, retries and the usage ledger
- anything else: handed to ``dspy.LM(spec)`` as a LiteLLM model string (``openai/...``, ``ollama/...``)

Unset roles default to all-embedded, or to Groq when ``GROQ_API_KEY`` is set (env or ``.env``):
answerer ``groq/openai/gpt-oss-120b``, grader and rewriter ``groq/openai/gpt-oss-20b``, judge
``groq/qwen/qwen3-32b`` (another family, to reduce self-preference).

:func:`check_spec` says whether a spec is usable here (``rag models``), with local checks only: no network call.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from rag.config import ROLES, Settings, load_dotenv
from rag.errors import ConfigError, SieveError

if TYPE_CHECKING:  # DSPy is imported where an LM is made: `rag models --no-check` and `rag artifacts` never need it
    import dspy

EMBEDDED = "embedded"
GROQ_DEFAULTS = {
    "grader": "groq/openai/gpt-oss-20b",
    "rewriter": "groq/openai/gpt-oss-20b",
    "answerer": "groq/openai/gpt-oss-120b",
    "judge": "groq/qwen/qwen3-32b",
}

_LMS: dict[tuple, dspy.LM] = {}
_LMS_LOCK = threading.Lock()


def resolve_specs(settings: Settings) -> dict[str, str]:
    """role -> model spec after defaults: explicit ``<role>_model`` wins, else Groq if a key is set, else embedded."""
    load_dotenv()
    has_key = bool(os.environ.get("GROQ_API_KEY"))
    return {role: settings.model_for(role) or (GROQ_DEFAULTS[role] if has_key else EMBEDDED) for role in ROLES}


def gguf_path_for(spec: str, settings: Settings) -> Path:
    """The GGUF file an 'embedded' or 'gguf:/path' spec points to (not checked for existence)."""
    from rag.lm.models import model_path

    if spec == EMBEDDED:
        return Path(settings.gguf_path).expanduser() if settings.gguf_path else model_path(settings.embedded_model)
    path = spec.removeprefix("gguf:").strip()
    if not path:
        raise ConfigError("model spec 'gguf:' needs a file path, e.g. gguf:/models/qwen2.5-0.5b-instruct-q4_k_m.gguf")
    return Path(path).expanduser()


def _key(spec: str, settings: Settings) -> tuple:
    common = (spec, settings.cache)
    if spec == EMBEDDED or spec.startswith("gguf:"):
        embedded = (settings.gguf_path, settings.embedded_model) if spec == EMBEDDED else None
        return (*common, embedded, settings.n_ctx, settings.n_threads, settings.llama_extra_bufts,
                settings.llama_lazy_grammar, settings.llama_draft_tokens, settings.embedded_max_tokens)
    if spec.startswith("groq/"):
        return (*common, settings.groq_base_url, settings.lm_timeout, settings.lm_max_retries, settings.rate_limits)
    return common


def _make(spec: str, settings: Settings) -> dspy.LM:
    import dspy

    if spec == EMBEDDED or spec.startswith("gguf:"):
        from rag.lm.local import AsyncLlamaCppEngine, LlamaCppEngine

        path = gguf_path_for(spec, settings)
        engine = LlamaCppEngine(path, n_ctx=settings.n_ctx, max_tokens=settings.embedded_max_tokens,
                                n_threads=settings.n_threads, extra_bufts=settings.llama_extra_bufts,
                                lazy_grammar=settings.llama_lazy_grammar, draft_tokens=settings.llama_draft_tokens)
        name = f"embedded/{settings.embedded_model}" if spec == EMBEDDED and not settings.gguf_path else f"gguf/{path.stem}"
        return dspy.LM(name, engine=engine, async_engine=AsyncLlamaCppEngine(engine), cache=settings.cache,
                       temperature=0.0, max_tokens=settings.embedded_max_tokens, num_retries=0)
    if spec.startswith("groq/"):
        from rag.lm.groq import AsyncGroqEngine, GroqEngine
        from rag.lm.limits import RetryPolicy, parse_rate_limits

        load_dotenv()  # GROQ_API_KEY may live in ./.env
        if spec == "groq/":
            raise ConfigError("model spec 'groq/' needs a model id, e.g. groq/openai/gpt-oss-20b")
        engine = GroqEngine(base_url=settings.groq_base_url, timeout=settings.lm_timeout,
                            retry=RetryPolicy(max_retries=settings.lm_max_retries),
                            rate_limits=parse_rate_limits(settings.rate_limits))
        # DSPy's own retry loop is off: the engine retries (bounded, honouring retry-after).
        return dspy.LM(spec, engine=engine, async_engine=AsyncGroqEngine(engine), cache=settings.cache,
                       temperature=0.0, num_retries=0)
    if "/" not in spec:
        raise ConfigError(f"model spec {spec!r} is not recognised; use 'embedded', 'gguf:/path/model.gguf', "
                          "'groq/<model>' or a LiteLLM model string like 'openai/gpt-4o-mini'")
    return dspy.LM(spec, cache=settings.cache)


def build_lm(spec: str, settings: Settings) -> dspy.LM:
    """The ``dspy.LM`` for a model spec; the same spec and settings give the same shared object."""
    spec = spec.strip()
    key = _key(spec, settings)
    with _LMS_LOCK:
        if key not in _LMS:
            _LMS[key] = _make(spec, settings)
        return _LMS[key]


def lms_for_roles(settings: Settings) -> dict[str, dspy.LM]:
    """role -> ``dspy.LM`` for grader, rewriter, answerer and judge (shared objects for equal specs)."""
    return {role: build_lm(spec, settings) for role, spec in resolve_specs(settings).items()}


def configure_dspy(settings: Settings, *, adapter: bool = True) -> None:
    """Call once at the entry point: DSPy's disk cache in ``settings.cache_dir`` (off with ``cache=False``),
    and Sieve's adapter (``rag.lm.adapter.SieveAdapter``, a compact JSONAdapter) as the default, so typed
    outputs use schema-constrained decoding."""
    import dspy

    cache_dir = Path(settings.cache_dir).expanduser()
    if settings.cache:
        cache_dir.mkdir(parents=True, exist_ok=True)
    dspy.configure_cache(enable_disk_cache=settings.cache, enable_memory_cache=settings.cache,
                         disk_cache_dir=str(cache_dir))
    if adapter:
        from rag.lm.adapter import SieveAdapter

        dspy.configure(adapter=SieveAdapter(demo_position=settings.demo_position))


def check_spec(spec: str, settings: Settings) -> tuple[bool, str]:
    """(usable, one-line detail). Embedded/GGUF: the file is verified, loads and runs (with its speed here).
    Groq: a key is present."""
    try:
        if spec == "embedded" or spec.startswith("gguf:"):
            from rag.lm.local import load_llama, use_extra_bufts
            from rag.lm.models import verified_status

            path = gguf_path_for(spec, settings)  # an embedded model is assembled and verified here
            llama, lock = load_llama(path, settings.n_ctx, settings.n_threads, settings.llama_extra_bufts)
            repack = "on" if use_extra_bufts(settings.llama_extra_bufts) else "off"
            check = verified_status(path) or "not a packaged model: no pinned sha256"
            with lock:
                prompt_tps, output_tps = measure_speed(llama)
            return True, (f"{path.name} ({path.stat().st_size / 1e6:,.0f} MB, {check}), loaded: {llama.n_ctx()} ctx, "
                          f"{llama.context_params.n_threads} threads, repack {repack}, prompt {prompt_tps:.0f} tok/s, "
                          f"output {output_tps:.1f} tok/s")
        if spec.startswith("groq/"):
            load_dotenv()
            if not os.environ.get("GROQ_API_KEY"):
                return False, "GROQ_API_KEY is not set (env or .env)"
            return True, "GROQ_API_KEY present" + (f", base URL {settings.groq_base_url}" if settings.groq_base_url else "")
        return True, "LiteLLM model string; not checked (needs that provider's key)"
    except SieveError as exc:
        return False, str(exc)


def measure_speed(llama, prompt_tokens: int = 128, output_tokens: int = 8) -> tuple[float, float]:
    """(prompt tokens/s, output tokens/s) on this machine now: one batched prompt, then single-token steps."""
    import time

    text = " ".join(f"Passage {i}: the with statement wraps a block with a context manager." for i in range(60))
    tokens = llama.tokenize(text.encode("utf-8"))[:prompt_tokens]
    llama.reset()
    start = time.perf_counter()
    llama.eval(tokens)
    prompt_s = time.perf_counter() - start
    start = time.perf_counter()
    for token in tokens[:output_tokens]:
        llama.eval([token])
    output_s = time.perf_counter() - start
    llama.reset()
    return len(tokens) / prompt_s, output_tokens / output_s
