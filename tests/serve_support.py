"""What the rag serve tests share: a small real index built the way `rag index DIR` builds it (one document of
three sections, one whose title and text carry a script and an <img onerror>), scripted programs (DummyLM per
role, keyed by question, so concurrent questions stay deterministic; like the embedded model, they pass what they
write to a rag.lm.streaming listener when one is registered), and the app served on loopback."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dspy
import httpx
import pytest
from dspy.clients.engines.dummy_engine import AsyncDummyEngine, DummyEngine
from dspy.utils import DummyLM

from rag.agent.program import Program
from rag.config import ROLES
from rag.lm import streaming
from rag.serve.app import create_app
from rag.serve.evalview import RunBrowser
from rag.serve.programs import Programs
from rag.serve.server import Background

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_RUNS = ROOT / "tests" / "fixtures" / "runs"

STATEMENTS = """# Compound statements

## The with statement

The with statement is used to wrap the execution of a block with methods defined by a context manager.
It calls __enter__ before the block and __exit__ after it, even when the block raises.

## The nonlocal statement

The nonlocal statement causes the listed identifiers to refer to previously bound variables in the nearest
enclosing scope excluding globals.

## The pass statement

pass is a null operation: when it is executed, nothing happens. It is useful as a placeholder.
"""
# Untrusted document text: if the page ever inserted it as HTML, window.__xss would be set.
TRICKY = """# Swallows <script>window.__xss = "title"</script>

The airspeed of a swallow is <img src=x onerror="window.__xss = 'img'"> not recorded here.
<script>window.__xss = "text"</script> Ask about "onerror" attributes and script tags.
"""

ANSWERABLE = "What does the with statement do?"
UNANSWERABLE = "What is the airspeed velocity of an unladen swallow?"
XSS = "Tell me about swallows and onerror script tags"
SLOW = "Which statement does nothing at all?"  # its grader waits for GATE (the queue test)
# A follow-up to ANSWERABLE: the condenser (the rewriter's model) makes it STANDALONE, which is searched and answered.
FOLLOW_UP = "And the one that does nothing?"
STANDALONE = "What does the pass statement do?"
WITH_ID, PASS_ID, TRICKY_ID = "statements.md#000", "statements.md#002", "tricky.md#000"
# Its answerer writes slowly, and stops halfway through the answer until its stream gate opens (the streaming tests).
STREAMED = "When does the with statement call __exit__?"
STREAMED_ANSWER = (f"The with statement calls __exit__ after the block has run [{WITH_ID}], and it still calls it when "
                   f"the block raises an exception, so the cleanup always happens [{WITH_ID}].")
CHUNK_CHARS, STREAMED_PAUSE_S = 4, 0.03  # what a scripted model writes at a time; STREAMED's pause between pieces
XSS_ANSWER = 'Swallows <img src=x onerror="window.__xss = \'answer\'"><script>window.__xss = "answer"</script> [tricky.md#000]'

_INDEX: dict[str, Any] = {}


@pytest.fixture(scope="module")
def gate() -> threading.Event:
    """The scripted LMs wait on this before answering; open unless a test closes it (to hold a request in flight)."""
    event = threading.Event()
    event.set()
    return event


def serve_index(tmp_path_factory) -> Any:
    """The real index (bm25s + FAISS) over the two documents, built once per test session."""
    if "index" not in _INDEX:
        from rag.config import load_settings
        from rag.index.build import build_index
        from rag.ingest.chunking import chunk_documents
        from rag.ingest.corpus import load_folder

        docs = tmp_path_factory.mktemp("serve-docs")
        (docs / "statements.md").write_text(STATEMENTS, encoding="utf-8")
        (docs / "tricky.md").write_text(TRICKY, encoding="utf-8")
        index_dir = tmp_path_factory.mktemp("serve-index")
        settings = load_settings({"index_dir": index_dir})
        chunks = chunk_documents(load_folder(docs, show_progress=False), 300, 0)
        _INDEX["index"] = build_index(chunks, index_dir, settings, show_progress=False)
    return _INDEX["index"]


class _GatedEngine(DummyEngine):
    def __init__(self, owner: "GatedLM", gate: threading.Event) -> None:
        super().__init__(owner)
        self.gate, self.holds, self.owner_calls = gate, owner.holds, owner.calls
        self.stream_gate = owner.stream_gate

    def _complete_messages(self, messages):
        prompt = str(messages[-1].get("content", ""))
        self.owner_calls.append(prompt)
        if self.holds and SLOW in prompt:
            self.gate.wait(timeout=30)
        response = super()._complete_messages(messages)
        listener = streaming.current()
        if listener is not None:
            self._write(listener, response.message.text, STREAMED in prompt and self.stream_gate is not None)
        return response

    def _write(self, listener: streaming.Listener, text: str, slow: bool) -> None:
        """``text`` to the listener a few characters at a time, as the embedded engine passes it; ``slow`` (STREAMED, to
        a model with a stream gate): a pause between pieces, and halfway through the answer field a wait for the gate.
        A slow one stops (``Cancelled``) before its next piece, or while it waits, once the listener's ``cancelled``
        check says so, as the embedded engine stops at its next token; the others write to the end, as a model that
        cannot be stopped does (the runner then stops the question at its next node)."""
        if listener.on_call is not None:
            listener.on_call()
        mark = text.find("[[ ## answer ## ]]")
        hold_at = (mark + len(text)) // 2 if mark >= 0 else len(text) // 2
        held = not slow
        for at in range(0, len(text), CHUNK_CHARS):
            if not held and at >= hold_at:
                held = True
                deadline = time.monotonic() + 30
                while not self.stream_gate.wait(0.02) and time.monotonic() < deadline:
                    streaming.raise_if_cancelled(listener, "the scripted model")
            if slow:
                streaming.raise_if_cancelled(listener, "the scripted model")
            listener.on_text(text[at:at + CHUNK_CHARS])
            if slow:
                time.sleep(STREAMED_PAUSE_S)


class GatedLM(DummyLM):
    """DummyLM that, for prompts containing ``SLOW``, waits until ``gate`` is set: it holds the worker busy (unless
    ``holds`` is False). ``calls`` keeps every prompt it was sent, shared with its copies. With a registered
    ``rag.lm.streaming`` listener it passes its reply to it a few characters at a time; for ``STREAMED``, slowly, and
    halfway through the answer it waits until ``stream_gate`` is set (when one is given), and stops there or at its next
    piece when the listener's ``cancelled`` check says so."""

    def __init__(self, answers: dict[str, dict[str, Any]], gate: threading.Event, holds: bool = True,
                 stream_gate: threading.Event | None = None) -> None:
        super().__init__(answers)
        self.gate, self.holds, self.calls, self.stream_gate = gate, holds, [], stream_gate
        self._gated()

    def _gated(self, calls: list[str] | None = None) -> "GatedLM":
        self.calls = self.calls if calls is None else calls
        self._engine_spec = _GatedEngine(self, self.gate)
        self._async_engine_spec = AsyncDummyEngine(self._engine_spec)
        return self

    def copy(self, **kwargs):  # rag.usage.metering calls each predictor on a copy; DummyLM.copy sets plain engines
        return super().copy(**kwargs)._gated(self.calls)


class SlowLoad:
    """A model that takes ``seconds`` to load, once per process (as rag.lm.local.load_llama loads a GGUF file)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.loads, self._lock = seconds, 0, threading.Lock()

    def load(self) -> None:
        with self._lock:
            if not self.loads:
                time.sleep(self.seconds)
                self.loads += 1


class _LoadingEngine(DummyEngine):
    def __init__(self, owner: "LoadingLM", model: SlowLoad) -> None:
        super().__init__(owner)
        self.model = model

    def load(self) -> None:  # what rag.agent.program.load_models calls ahead (LlamaCppEngine.load)
        self.model.load()

    def _complete_messages(self, messages):
        self.load()  # loaded lazily, inside the first call, as LlamaCppEngine.complete does
        return super()._complete_messages(messages)


class LoadingLM(DummyLM):
    """DummyLM whose engine loads ``model`` inside its first call unless ``engine.load()`` was called before."""

    def __init__(self, answers: dict[str, dict[str, Any]], model: SlowLoad) -> None:
        super().__init__(answers)
        self.load_state = model
        self._loading()

    def _loading(self) -> "LoadingLM":
        self._engine_spec = _LoadingEngine(self, self.load_state)
        self._async_engine_spec = AsyncDummyEngine(self._engine_spec)
        return self

    @property
    def engine(self):  # as dspy.LM names its engine (DummyLM is a BaseLM, which has none)
        return self._engine_spec

    def copy(self, **kwargs):  # DummyLM.copy sets a plain engine
        return super().copy(**kwargs)._loading()


def scripted_lms(gate: threading.Event, stream_gate: threading.Event | None = None) -> dict[str, dspy.BaseLM]:
    no = {"subject": "swallow", "relevant": False, "relevant_chunk_ids": [], "reason": "nothing about swallows"}
    grader = GatedLM({
        ANSWERABLE: {"subject": "with statement", "relevant": True, "relevant_chunk_ids": [WITH_ID],
                     "reason": "the passage defines the with statement"},
        UNANSWERABLE: no,
        XSS: {"subject": "swallows", "relevant": True, "relevant_chunk_ids": [TRICKY_ID],
              "reason": 'it says <b>"onerror"</b> <script>x</script>'},
        SLOW: {"subject": "pass", "relevant": True, "relevant_chunk_ids": [PASS_ID], "reason": "pass does nothing"},
        STANDALONE: {"subject": "pass statement", "relevant": True, "relevant_chunk_ids": [PASS_ID],
                     "reason": "the passage says what pass does"},
        STREAMED: {"subject": "with statement", "relevant": True, "relevant_chunk_ids": [WITH_ID],
                   "reason": "the passage says when __exit__ is called"},
    }, gate)
    # the condenser's prompt holds the follow-up (and the conversation): FOLLOW_UP first, the conversation may hold others
    rewriter = DummyLM({FOLLOW_UP: {"question": STANDALONE}, UNANSWERABLE: {"query": "swallow airspeed velocity"}})
    answerer = GatedLM({
        ANSWERABLE: {"cited_ids": [WITH_ID], "answer": f"It wraps a block with a context manager's methods [{WITH_ID}]."},
        XSS: {"cited_ids": [TRICKY_ID], "answer": XSS_ANSWER},
        SLOW: {"cited_ids": [PASS_ID], "answer": f"pass does nothing [{PASS_ID}]."},
        # cited in the field only, as small models often do: the page still links it in the answer
        STANDALONE: {"cited_ids": [PASS_ID], "answer": "pass is a null operation: nothing happens."},
        STREAMED: {"cited_ids": [WITH_ID], "answer": STREAMED_ANSWER},
    }, gate, holds=False, stream_gate=stream_gate)
    return {"grader": grader, "rewriter": rewriter, "answerer": answerer, "judge": answerer}


def scripted_programs(index: Any, lms: dict[str, dspy.BaseLM]) -> Programs:
    """The named configurations, each answered by the real agent over ``index`` with the scripted LMs (follow-ups
    condensed on the rewriter's, as rag.agent.program builds it)."""
    from rag.agent.conversation import Condenser
    from rag.agent.module import Sieve
    from rag.retrieval.retriever import Retriever

    def build(settings, use_artifact: bool) -> Program:
        retriever = Retriever(index, mode=settings.mode, top_k=settings.top_k)
        agent = Sieve(retriever, max_rewrites=settings.max_rewrites, use_reflection=settings.reflection,
                      top_k=settings.top_k, lms=lms,
                      condenser=Condenser(settings.history_turns, settings.history_chars))
        return Program(agent=agent, artifact=None, models={r: "dummy" for r in ROLES}, lms=lms,
                       messages=["scripted test program (DummyLM per role)"])

    return Programs(["top_k=3"], builder=build, index=index)


_SERVERS: dict[str, Background] = {}


def server_runner(url: str) -> Any:
    """The question runner of the server at ``url`` (started by ``serve``)."""
    return _SERVERS[url].server.config.app.state.runner


def serve(index: Any, gate: threading.Event, *, max_waiting: int = 8, runs: Path = FIXTURE_RUNS,
          lms: dict[str, dspy.BaseLM] | None = None, host: str = "127.0.0.1") -> Background:
    """The app over ``index`` with scripted programs (``lms``, default ``scripted_lms(gate)``) and the committed
    fixture runs, on a free port of ``host`` (the app is told it listens there, as ``rag serve --host`` tells it)."""
    programs = scripted_programs(index, lms or scripted_lms(gate))
    browser = RunBrowser(runs, golden_dir=ROOT / "golden", artifacts_dir=ROOT / "artifacts")
    examples = [{"type": "answerable", "question": ANSWERABLE, "id": "ex-a"},
                {"type": "unanswerable", "question": UNANSWERABLE, "id": "ex-u"}]
    background = Background(create_app(programs, browser, examples=examples, max_waiting=max_waiting, host=host),
                            host=host)
    _SERVERS[background.url] = background
    return background


@contextlib.contextmanager
def warm_serve(index: Any, gate: threading.Event, lms: dict[str, dspy.BaseLM]) -> Iterator[str]:
    """``serve``'s URL once one question has been answered: the first call through DSPy imports and warms up what
    every later one reuses, so a browser test's timings start from a warm server."""
    with serve(index, gate, lms=lms) as base:
        assert httpx.post(base + "/api/ask", json={"question": ANSWERABLE}, timeout=600).status_code == 200
        yield base


def settle(url: str, timeout_s: float = 120) -> None:
    """Wait until the server at ``url`` runs nothing: a question a failed test left running ends before the next test."""
    runner = server_runner(url)
    deadline = time.monotonic() + timeout_s
    while runner.pending() and time.monotonic() < deadline:
        time.sleep(0.1)
