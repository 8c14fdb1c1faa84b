"""What the Ray tests' workers build: importable (and so picklable) factories that run on worker processes.

``ScriptedProgram`` is the scripted-LM program of ``tests/test_evaluate.py`` (real bm25s index and retriever,
the real Sieve agent and judge, a DummyLM that picks each role's reply), built on a worker. ``Caller`` sends
chat calls through the real ``GroqEngine`` to a loopback server, under whichever rate limiter the process has.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

MAX_CALLS = 50  # calls one Caller.call may make


@dataclass
class ScriptedProgram:
    """() -> (agent, judge, chunks) over the index at ``index_dir``; every LM reply waits ``delay`` seconds."""

    index_dir: str
    delay: float = 0.0

    def __call__(self):
        import dspy

        from rag.agent.judging import AnswerJudge
        from rag.agent.module import Sieve
        from rag.config import Settings
        from rag.index.store import Index
        from rag.retrieval.retriever import Retriever
        from tests.test_evaluate import ScriptedLM

        script, delay = PerCopyScript(), self.delay

        def slow(messages):
            time.sleep(delay)
            return script(messages)

        index = Index.load(self.index_dir, Settings(index_dir=Path(self.index_dir)))
        retriever = Retriever(index, mode="bm25", top_k=2, candidates=8)
        lm = ScriptedLM(slow)
        dspy.configure(lm=lm)
        return Sieve(retriever, max_rewrites=1, use_reflection=True, top_k=2), AnswerJudge(lm), index.chunks


class PerCopyScript:
    """tests/test_evaluate.py's Script, one per copy of its questions (``"... [copy 2]"``): that Script remembers
    which questions it graded, so copies sharing one would behave differently on one worker than on two."""

    TAG = re.compile(r" \[copy (\d+)\]")

    def __init__(self):
        self.scripts: dict[str, object] = {}

    def __call__(self, messages):
        from tests.test_evaluate import Script

        found = self.TAG.search(messages[-1]["content"])
        script = self.scripts.setdefault(found.group(1) if found else "0", Script(boom=False))
        return script([{**m, "content": self.TAG.sub("", m["content"])} for m in messages])


class Caller:
    """A worker that makes chat calls with the real Groq engine to ``base_url`` (the shared limiter if given)."""

    def __init__(self, base_url: str, ledger_path: str, rpm: int, limiter=None):
        import dspy

        from rag.lm.groq import GroqEngine
        from rag.lm.limits import Limits, RetryPolicy
        from rag.usage.ledger import Ledger

        if limiter is not None:
            from rag.distributed.limiter import use_cluster_limiter

            use_cluster_limiter(limiter)
        self.limiter = limiter
        engine = GroqEngine(api_key="test-key-not-real", base_url=base_url, ledger=Ledger(ledger_path),
                            rate_limits={"*": Limits(rpm, 1_000_000)}, retry=RetryPolicy(max_retries=0))
        self.lm = dspy.LM("groq/openai/gpt-oss-20b", engine=engine, cache=False, num_retries=0, max_tokens=16)

    def call(self, n: int) -> list[str]:
        """``n`` calls (at most MAX_CALLS); each outcome: "ok" or the error's class name."""
        from rag.errors import QuotaExhausted

        out = []
        for i in range(min(n, MAX_CALLS)):
            try:
                self.lm(messages=[{"role": "user", "content": f"call {i} from {os.getpid()}"}])
                out.append("ok")
            except QuotaExhausted as exc:
                out.append(type(exc).__name__)
                if self.limiter is not None:
                    from rag.distributed.limiter import stop_all

                    stop_all(self.limiter, str(exc))
            except Exception as exc:  # noqa: BLE001 - reported to the test, which names what it expects
                out.append(type(exc).__name__)
        return out


@dataclass
class LoopbackProgram:
    """``rag eval``'s own program for ``settings`` (rag.distributed.eval.SettingsProgram) on a worker, with a
    placeholder Groq key (the settings point every hosted role at a loopback server)."""

    settings: object
    use_artifact: bool = False

    def __call__(self):
        from rag.distributed.eval import SettingsProgram

        os.environ.setdefault("GROQ_API_KEY", "loopback-not-a-key")
        return SettingsProgram(self.settings, self.use_artifact)()


@dataclass
class DyingLoopbackProgram(LoopbackProgram):
    """:class:`LoopbackProgram` whose worker kills itself (SIGKILL) mid-item, right after the usage row of its
    ``after``-th call reached the driver's inbox (so no call is in flight at its death), once per ``flag`` file:
    only the first worker to get there dies; the others and the replacement run on."""

    flag: str = ""
    after: int = 3

    def __call__(self):
        import itertools
        import signal

        from rag.usage import ledger

        built = super().__call__()
        send, calls = ledger._send, itertools.count(1)

        def send_then_die(row):
            send(row)
            if next(calls) == self.after:
                try:
                    os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    return
                os.kill(os.getpid(), signal.SIGKILL)

        ledger.capture(send_then_die)
        return built
