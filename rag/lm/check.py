"""Is a model spec usable here? (``rag models``) Local checks only: no network call is made."""

from __future__ import annotations

import os

from rag.config import Settings, load_dotenv
from rag.errors import SieveError


def check_spec(spec: str, settings: Settings) -> tuple[bool, str]:
    """(usable, one-line detail). Embedded/GGUF: the file exists and loads. Groq: a key is present."""
    try:
        if spec == "embedded" or spec.startswith("gguf:"):
            from rag.lm.local import load_llama
            from rag.lm.roles import gguf_path_for

            path = gguf_path_for(spec, settings)
            llama, _ = load_llama(path, settings.n_ctx)
            return True, f"{path.name} loaded ({llama.n_ctx()} ctx, {path.stat().st_size / 1e6:.0f} MB)"
        if spec.startswith("groq/"):
            load_dotenv()
            if not os.environ.get("GROQ_API_KEY"):
                return False, "GROQ_API_KEY is not set (env or .env)"
            return True, "GROQ_API_KEY present" + (f", base URL {settings.groq_base_url}" if settings.groq_base_url else "")
        return True, "LiteLLM model string; not checked (needs that provider's key)"
    except SieveError as exc:
        return False, str(exc)
