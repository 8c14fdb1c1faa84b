"""The failure catalogue, continued: the cases that need more than files (issue 16).

Interruptions by a real SIGINT at a chosen moment (mid-index, mid-scoring, mid-eval) and the run resumed;
a second build while the first holds its lock; ``rag index -q`` in a fresh process (no loading bar); a torn
results line that only the run's writer may repair. Each asserts what tests/test_failure_catalogue.py asserts
(exit code, one message line naming the file, no traceback, user files unchanged). The agent cases run on
scripted language models (DSPy's DummyLM): the control flow is fixed, retrieval and every file are real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.catalogue_support import check, checksums, docs_folder, golden, index_copy, run_cli
from tests.retrieval_support import small_index


@pytest.fixture(autouse=True)
def sigint_raises_keyboardinterrupt():
    """Ctrl-C as an interactive user sends it. A shell starts background jobs (``pytest &``, ``nohup``) with
    SIGINT ignored, and a child inherits that, so without this the self-sent SIGINTs below would do nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_concurrent_index_builds(user: Path):
    from rag.index.layout import build_lock

    docs_folder(user)
    idx = index_copy(user)
    before = checksums(user)
    with build_lock(idx):  # the first build, holding its lock while this one starts
        res = run_cli("index", user / "docs", "--index-dir", idx)
    check(res, 1, rf"^Error: another rag index is building .*/idx right now \(pid {os.getpid()}\); wait for it")
    assert "embedding" not in res.err
    assert checksums(user) == before
    res = run_cli("index", user / "docs", "--index-dir", idx, "-q")  # the lock is gone with its holder
    assert res.code == 0 and "Indexed 2 chunks" in res.out, res.err
    assert sorted(p.name for p in user.iterdir()) == ["docs", "idx"]


def test_sigint_mid_index_then_rerun(user: Path, monkeypatch: pytest.MonkeyPatch):
    import rag.index.build

    docs_folder(user)
    idx = index_copy(user)
    before = checksums(user)
    real = rag.index.build._encode  # the embedding step of a build, whichever runtime embeds

    def embed_then_ctrl_c(*args, **kwargs):
        vectors = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # a real SIGINT, delivered while the build is under way
        return vectors

    monkeypatch.setattr(rag.index.build, "_encode", embed_then_ctrl_c)
    res = run_cli("index", user / "docs", "--index-dir", idx, "-q")
    check(res, 130, r"^Interrupted: the index at .*/idx was not changed .*run the same command again")
    assert checksums(user) == before  # the previous index is intact
    assert sorted(p.name for p in user.iterdir()) == ["docs", "idx"]  # no temporary folder, no lock left
    monkeypatch.setattr(rag.index.build, "_encode", real)
    res = run_cli("index", user / "docs", "--index-dir", idx, "-q")
    assert res.code == 0 and "Indexed 2 chunks" in res.out, res.err


def test_sigint_during_retrieval_only(user: Path, monkeypatch: pytest.MonkeyPatch):
    from rag.retrieval.retriever import Retriever

    golden()(user)
    real = Retriever.search

    def search_then_ctrl_c(self, *args, **kwargs):
        hits = real(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return hits

    monkeypatch.setattr(Retriever, "search", search_then_ctrl_c)
    before = checksums(user)
    res = run_cli("eval", "--retrieval-only", "--golden", user / "golden.jsonl", "--index-dir", small_index().dir)
    check(res, 130, r"^Interrupted: retrieval-only scoring keeps no partial results .*run the same command again")
    assert checksums(user) == before


def test_quiet_index_in_a_fresh_process_prints_nothing(user: Path):
    docs_folder(user)
    env = {**os.environ, "SIEVE_HOME": str(user / "home")}
    proc = subprocess.run([sys.executable, "-m", "rag", "index", "docs", "--index-dir", "idx", "-q"], cwd=user, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no "Loading weights" bar, no progress
    assert proc.stdout.startswith("Indexed 2 chunks")


# ---- the agent path, on a scripted language model (the control flow is fixed; retrieval and files are real)
def scripted_lms(monkeypatch: pytest.MonkeyPatch, ctrl_c_at: int | None = None) -> list[int]:
    """One DummyLM per role (a fixed reply each) in place of the configured models; returns the call counter.
    The ``ctrl_c_at``-th call sends a real SIGINT to this process."""
    import dspy
    from dspy.clients.engines.dummy_engine import AsyncDummyEngine, DummyEngine
    from dspy.utils import DummyLM

    import rag.lm.configure

    calls: list[int] = []

    class Engine(DummyEngine):
        def _complete_messages(self, messages):
            calls.append(1)
            if len(calls) == ctrl_c_at:
                os.kill(os.getpid(), signal.SIGINT)
            return super()._complete_messages(messages)

    class Scripted(DummyLM):
        def __init__(self, reply):
            super().__init__({"": reply}, adapter=dspy.JSONAdapter())
            self._bind()

        def _bind(self):
            self._engine_spec = Engine(self)
            self._async_engine_spec = AsyncDummyEngine(self._engine_spec)

        def copy(self, **kwargs):  # DSPy copies an LM per call; the copy keeps the counting engine
            new = super().copy(**kwargs)
            new._bind()
            return new

    replies = {"grader": {"reason": "fits", "relevant": True, "relevant_chunk_ids": []},
               "rewriter": {"query": "assert statement"},
               "answerer": {"answer": "It checks a condition [assert#000].", "cited_ids": ["assert#000"]},
               "judge": {"reason": "ok", "correct": True, "faithful": True}}
    lms = {role: Scripted(reply) for role, reply in replies.items()}
    monkeypatch.setattr(rag.lm.configure, "lms_for_roles", lambda settings: lms)
    return calls


def eval_args(user: Path) -> list[object]:
    return ["eval", "--config", "baseline", "--golden", user / "golden.jsonl", "--index-dir", small_index().dir,
            "--out", user / "run", "--threads", "1", "--no-artifact", "--split", "test", "--quiet"]


def test_sigint_mid_eval_then_resume(user: Path, monkeypatch: pytest.MonkeyPatch):
    golden()(user)
    before = checksums(user, (user / "run",))
    calls = scripted_lms(monkeypatch, ctrl_c_at=3)  # item 1: answer + judge; item 2: Ctrl-C at its answer
    res = run_cli(*eval_args(user))
    check(res, 130, r"^Interrupted: finished items are kept in the run folder; run the same command again to resume")
    done = [json.loads(line)["id"] for line in (user / "run" / "results.jsonl").read_text().splitlines()]
    assert len(done) == 1
    calls.clear()
    scripted_lms(monkeypatch)
    res = run_cli(*eval_args(user))
    assert res.code == 0 and "Traceback" not in res.err, res.err
    again = [json.loads(line)["id"] for line in (user / "run" / "results.jsonl").read_text().splitlines()]
    assert again[:1] == done and sorted(again) == sorted(["g-assert", "g-while", "g-mars"])  # nothing ran twice
    assert checksums(user, (user / "run",)) == before


def test_torn_results_line_is_repaired_by_the_writer_only(user: Path, monkeypatch: pytest.MonkeyPatch):
    golden()(user)
    scripted_lms(monkeypatch)
    args = eval_args(user)
    assert run_cli(*args).code == 0
    results = user / "run" / "results.jsonl"
    whole = results.read_bytes()
    torn = whole[: len(whole) - 40]  # the last record, cut mid-write
    results.write_bytes(torn)
    res = run_cli("report", user / "run")  # a reader reports it and leaves the file alone
    check(res, 0, r"^Warning: .*/results\.jsonl:3: torn last line")
    assert results.read_bytes() == torn
    res = run_cli(*args)  # the run's own writer keeps a copy, cuts the torn line and runs that item again
    assert res.code == 0 and "Traceback" not in res.err, res.err
    backups = list((user / "run").glob("results.jsonl.torn-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == torn
    assert f"the file as it was is kept in {backups[0]}" in res.err
    assert sorted(json.loads(x)["id"] for x in results.read_text().splitlines()) == ["g-assert", "g-mars", "g-while"]
