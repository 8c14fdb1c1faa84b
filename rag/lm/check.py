"""Is a model spec usable here? (``rag models``) Local checks only: no network call is made."""

from __future__ import annotations

import os

from rag.config import Settings, load_dotenv
from rag.errors import SieveError


def check_spec(spec: str, settings: Settings) -> tuple[bool, str]:
    """(usable, one-line detail). Embedded/GGUF: the file is verified, loads and runs (with its speed here).
    Groq: a key is present."""
    try:
        if spec == "embedded" or spec.startswith("gguf:"):
            from rag.lm.configure import gguf_path_for
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
