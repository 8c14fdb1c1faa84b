"""rag serve's question runner (rag.serve.stream.Runner) on its own: the real agent over a real index with scripted
programs (DummyLM per role; the grader of SLOW waits on a gate, which makes a slow step). A stopped question leaves
the queue, or, running, gives its worker slot to the next question at once and stops at its next node, its trace and
the runner's log saying "cancelled"; a waiting question hears how many are ahead of it each time the queue moves;
loading the program and its model are phases of their own, before the first node, never charged to it; and the
answer node's text arrives as token events while its model writes it (the scripted models write through the
rag.lm.streaming listener the runner registers, as the embedded model does)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import dspy
import pytest

from rag.agent.program import Program
from rag.config import ROLES
from rag.serve.programs import Programs
from rag.serve.stream import AnswerStream, Job, Runner
from tests.serve_support import (  # noqa: F401
    ANSWERABLE,
    PASS_ID,
    SLOW,
    STREAMED,
    STREAMED_ANSWER,
    LoadingLM,
    SlowLoad,
    scripted_lms,
    scripted_programs,
    serve_index,
)

LOAD_S = 2.0  # how long the scripted model takes to load


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return serve_index(tmp_path_factory)


def job(question: str) -> Job:
    return Job(question=question, config="full", artifact="auto", loop=asyncio.get_running_loop())


async def until(j: Job, kind: str, match=lambda data: True, seen: list | None = None, timeout: float = 60) -> dict:
    """The data of ``j``'s next event of ``kind`` that ``match``es; every event read on the way goes to ``seen``."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no {kind} event came; seen: {seen}"
        k, data = await asyncio.wait_for(j.events.get(), left)
        if seen is not None:
            seen.append((k, data))
        if k == kind and match(data):
            return data
        assert k != "error", data


async def settle(runner: Runner, pending: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while runner.pending() != pending:
        assert time.monotonic() < deadline, f"{runner.pending()} questions still pending, expected {pending}"
        await asyncio.sleep(0.02)



def run_then_shut(runner: Runner, scenario, *gates: threading.Event):
    """``scenario()`` run to its end; then, even when it failed, every gate opened and the runner shut down."""
    try:
        return asyncio.run(scenario())
    finally:
        for gate in gates:
            gate.set()
        runner.shutdown()

def test_a_stopped_question_leaves_the_queue_or_gives_its_slot_back_and_stops_at_its_next_node(index, capsys):
    """SLOW runs (its grader waits on the gate); a second SLOW and ANSWERABLE wait. The waiting SLOW is dropped: it
    leaves the queue. The running one is dropped: ANSWERABLE runs at once, to its answer, while the stopped one's
    grader call is still under way; when that call returns, the stopped question ends before its answer node."""
    gate = threading.Event()
    lms = scripted_lms(gate)
    runner = Runner(scripted_programs(index, lms))

    async def scenario() -> None:
        running, waiting, after = job(SLOW), job(SLOW), job(ANSWERABLE)
        runner.submit(running)
        await until(running, "start", lambda d: d["node"] == "grade")
        runner.submit(waiting)
        runner.submit(after)
        assert (await until(waiting, "progress"))["ahead"] == 1 and (await until(after, "progress"))["ahead"] == 2
        runner.drop(waiting)
        assert waiting.state == "cancelled" and runner.pending() == 2
        assert (await until(after, "progress"))["ahead"] == 1  # the queue moved up
        runner.drop(running)  # its grader still waits on the gate
        done = await until(after, "done", timeout=20)
        assert done["citations"] and not gate.is_set()  # answered while the stopped one is still in its grader
        await settle(runner, 1)  # the stopped one: its call is under way, and it holds a place in the queue till then
        assert running.state == "running"
        gate.set()
        await settle(runner, 0)

    run_then_shut(runner, scenario, gate)
    assert not any(SLOW in prompt for prompt in lms["answerer"].calls)  # no model call after the stop
    queued, stopped = list(runner.log)
    assert (queued["question"], queued["state"], queued["while"], queued["steps"]) == (SLOW, "cancelled", "queued", [])
    assert (stopped["state"], stopped["while"], stopped["steps"], stopped["stopped_before"]) == \
        ("cancelled", "running", ["retrieve", "grade"], "answer")
    assert stopped["question"] == SLOW
    err = capsys.readouterr().err
    assert "rag serve: cancelled a question while running (2 step(s) done, before answer" in err


def test_a_stopped_question_stops_the_model_call_under_way(index, capsys):
    """STREAMED's answerer writes half of its answer and waits there (its stream gate stays closed), as a long
    generation goes on. Stopped then, the call under way ends at the model's next piece (``Cancelled``, through the
    listener's ``cancelled`` check, as the embedded model stops at its next token), not when the model would have
    finished: the runner holds no place for it a moment later; the question ends cancelled, its answer step in the
    trace marked as stopped while the model wrote; no further model call is made, and the next question is answered."""
    gate, stream_gate = threading.Event(), threading.Event()
    gate.set()
    lms = scripted_lms(gate, stream_gate)
    runner = Runner(scripted_programs(index, lms))

    async def scenario() -> tuple[Job, float, dict]:
        j = job(STREAMED)
        runner.submit(j)
        await until(j, "token")
        runner.drop(j)
        start = time.monotonic()
        await settle(runner, 0, timeout=10)
        stopped_in = time.monotonic() - start
        after = job(ANSWERABLE)
        runner.submit(after)
        return j, stopped_in, await until(after, "done")

    j, stopped_in, done = run_then_shut(runner, scenario, stream_gate)
    assert stopped_in < 2.0  # the scripted model would have waited 30 s for its gate
    assert j.state == "cancelled" and j.trace.outcome == "cancelled" and done["citations"]
    assert [s.node for s in j.trace.steps] == ["retrieve", "grade", "answer"]
    assert "stopped while the model was writing" in j.trace.steps[-1].notes
    entry = runner.log[-1]
    assert (entry["question"], entry["while"], entry["steps"], entry["stopped_before"]) == \
        (STREAMED, "running", ["retrieve", "grade", "answer"], None)
    assert sum(STREAMED in prompt for prompt in lms["answerer"].calls) == 1  # nothing after the cut call
    assert "rag serve: cancelled a question while running (3 step(s) done, after" in capsys.readouterr().err


def test_the_trace_of_a_stopped_question_ends_cancelled(index):
    gate = threading.Event()
    runner = Runner(scripted_programs(index, scripted_lms(gate)))

    async def scenario() -> Job:
        j = job(SLOW)
        runner.submit(j)
        await until(j, "start", lambda d: d["node"] == "grade")
        runner.drop(j)
        gate.set()
        await settle(runner, 0)
        return j

    j = run_then_shut(runner, scenario, gate)
    assert j.state == "cancelled" and j.trace.outcome == "cancelled"
    assert [s.node for s in j.trace.steps] == ["retrieve", "grade"]  # the answer node never ran
    assert j.trace.to_dict()["totals"]["outcome"] == "cancelled"


def test_a_waiting_question_hears_how_many_are_ahead_each_time_the_queue_moves(index):
    """SLOW holds the worker; three more wait. The last hears 3 ahead, then fewer each time one ends, without a
    heartbeat (the Runner sends progress when the queue moves), and runs when none is left."""
    gate = threading.Event()
    runner = Runner(scripted_programs(index, scripted_lms(gate)))

    async def scenario() -> list[int]:
        first = job(SLOW)
        runner.submit(first)
        await until(first, "start", lambda d: d["node"] == "grade")
        rest = [job(ANSWERABLE) for _ in range(3)]
        for j in rest:
            runner.submit(j)
        last, seen = rest[-1], []
        assert (await until(last, "progress", seen=seen)) == {
            "state": "queued", "ahead": 3, "phase": None, "detail": None, "phase_s": None, "node": None,
            "node_s": None, "total_s": pytest.approx(0, abs=1)}
        assert runner.ahead(last) == 3
        gate.set()
        await until(last, "done", seen=seen)
        await settle(runner, 0)
        return [d["ahead"] for k, d in seen if k == "progress" and d["state"] == "queued"]

    aheads = run_then_shut(runner, scenario, gate)
    assert aheads == sorted(aheads, reverse=True), aheads  # never more ahead than before
    assert [a for i, a in enumerate(aheads) if i == 0 or aheads[i - 1] != a][:3] == [3, 2, 1], aheads


def _loading_programs(index, model: SlowLoad) -> Programs:
    """The scripted programs, their grader on a model that takes LOAD_S to load, lazily, in its first call."""
    lms = scripted_lms(threading.Event())
    lms["grader"].gate.set()
    lms["grader"] = LoadingLM(lms["grader"].answers, model)
    return scripted_programs(index, lms)


def test_loading_the_model_is_a_phase_of_its_own_never_charged_to_the_first_node(index):
    """Called as it is, the program would load its model inside the grader's first call, and the grade step would
    report the load as its latency. The runner loads it first, as the ``model`` phase of ``loading``, with its
    own time, and the grade step takes only its own."""
    cold = _loading_programs(index, SlowLoad(LOAD_S))
    program = cold._builder(cold.settings("full"), False)
    grade = program.agent(question=ANSWERABLE).trace.steps[1]
    assert grade.node == "grade" and grade.latency_ms >= LOAD_S * 1000  # what the runner must avoid

    model = SlowLoad(LOAD_S)
    runner = Runner(_loading_programs(index, model))

    async def scenario() -> list:
        j, seen = job(ANSWERABLE), []
        runner.submit(j)
        await until(j, "done", seen=seen)
        await settle(runner, 0)
        return seen

    seen = run_then_shut(runner, scenario)
    loading = [d for k, d in seen if k == "progress" and d["state"] == "loading"]
    assert [d["phase"] for d in loading][:2] == ["program", "model"] and loading[1]["detail"] == "dummy"
    program = next(d for k, d in seen if k == "program")
    assert [x["phase"] for x in program["loaded"]] == ["program", "model"]
    assert program["loaded"][1]["s"] >= LOAD_S * 0.95
    kinds = [k for k, _ in seen]
    assert kinds.index("program") < kinds.index("start")  # loaded before the first node began
    steps = next(d for k, d in seen if k == "done")["trace"]["steps"]
    assert [s["node"] for s in steps] == ["retrieve", "grade", "answer"]
    assert steps[1]["latency_ms"] < LOAD_S * 1000 / 2, steps[1]["latency_ms"]
    assert model.loads == 1


def test_the_embedded_engine_is_checked_on_this_cpu_and_loaded_before_the_program_is_handed_out(
        index, monkeypatch, tmp_path):
    """For a llama.cpp engine the one-time CPU check (rag.lm.probe, a child process) and the load are phases ``check``
    and ``model``, named after the model; the check runs once per file, the load once per program built."""
    from rag.lm import local, probe

    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF")
    checks: list[tuple[Path, bool]] = []
    monkeypatch.setattr(probe, "ensure_engine_runs", lambda path, extra_bufts=True: checks.append((path, extra_bufts)))
    monkeypatch.setattr(local, "use_extra_bufts", lambda setting="auto": False)

    class Engine(local.LlamaCppEngine):
        loads = 0

        def load(self):  # no model is loaded for real
            Engine.loads += 1

    engine = Engine(gguf)
    lm = dspy.LM("embedded/fake", engine=engine, async_engine=local.AsyncLlamaCppEngine(engine))

    def build(settings, use_artifact: bool) -> Program:
        agent = SimpleNamespace(retriever=SimpleNamespace(index=index))
        return Program(agent=agent, artifact=None, models={r: "embedded" for r in ROLES}, lms=dict.fromkeys(ROLES, lm))

    programs = Programs(["top_k=3"], builder=build, index=index)
    phases: list[tuple[str, str | None]] = []
    programs.get("full", "auto", on_phase=lambda phase, detail=None: phases.append((phase, detail)))
    assert phases == [("program", None), ("check", "embedded/fake"), ("model", "embedded/fake")]
    assert checks == [(gguf.resolve(), False)] and Engine.loads == 1
    phases.clear()
    programs.get("full", "auto", on_phase=lambda phase, detail=None: phases.append((phase, detail)))
    assert phases == []  # built and loaded: nothing to wait for
    programs.get("full", "none", on_phase=lambda phase, detail=None: phases.append((phase, detail)))
    assert phases == [("program", None), ("model", "embedded/fake")] and len(checks) == 1  # checked once per file


def test_the_answer_arrives_as_token_events_while_the_model_writes_it(index):
    """STREAMED's answerer writes a few characters at a time and stops halfway through its answer until its stream
    gate opens: by then token events have brought the answer's first half, each the text so far (a prefix of the
    answer, only ever growing), for the answer step only (the grader's reply is written through the same listener and
    never sent), and no done; the rest follows, and done carries the answer."""
    gate, stream_gate = threading.Event(), threading.Event()
    gate.set()
    runner = Runner(scripted_programs(index, scripted_lms(gate, stream_gate)))

    async def scenario() -> list:
        j, seen = job(STREAMED), []
        runner.submit(j)
        await until(j, "token", seen=seen)
        await asyncio.sleep(1.0)  # it writes up to the middle of the answer (~0.5 s) and waits there
        while not j.events.empty():
            seen.append(j.events.get_nowait())
        held = [d["text"] for k, d in seen if k == "token"]
        assert "done" not in [k for k, _ in seen] and held[-1] and len(held[-1]) < len(STREAMED_ANSWER)
        assert len(held[-1]) > 20, held  # the throttle let the text through as it grew, not only its first piece
        stream_gate.set()
        await until(j, "done", seen=seen)
        await settle(runner, 0)
        return seen

    seen = run_then_shut(runner, scenario, stream_gate)
    kinds = [k for k, _ in seen]
    answer = next(d for k, d in seen if k == "start" and d["node"] == "answer")
    tokens = [d for k, d in seen if k == "token"]
    assert kinds.index("start", kinds.index("step")) <= kinds.index("token")  # none before the answer node started
    assert {d["index"] for d in tokens} == {answer["index"]}
    texts = [d["text"] for d in tokens]
    assert all(STREAMED_ANSWER.startswith(t) for t in texts) and all(b.startswith(a) for a, b in zip(texts, texts[1:]))
    assert len(texts) >= 3 and [i for i, k in enumerate(kinds) if k == "token"][-1] < kinds.index("done")
    assert seen[-1][1]["answer"] == STREAMED_ANSWER


def test_token_events_are_throttled_and_the_complete_field_is_always_sent():
    """At most one token event per interval while the text grows, one more when the field is complete (a key follows
    it), and what was held back when the next node starts or the agent ends; a node other than the answer sends
    none, and a stopped job none."""
    sent: list[tuple[str, dict]] = []
    fake = SimpleNamespace(cancelled=False, emit=lambda kind, data: sent.append((kind, data)))
    stream = AnswerStream(fake, every_s=60)
    complete = '{"answer": "It wraps a block [a#1].", "cited_ids": ["a#1"]}'
    last = '{"cited_ids": ["a#1"], "answer": "It wraps a block [a#1]."}'  # whole only when the call ends
    stream.node(1, "grade")
    for ch in complete:
        stream.on_text(ch)
    assert sent == []
    stream.node(2, "answer")
    stream.on_call()
    for ch in complete:
        stream.on_text(ch)
    assert sent == [("token", {"index": 2, "text": "I"}), ("token", {"index": 2, "text": "It wraps a block [a#1]."})]
    sent.clear()
    stream.on_call()  # the call made again: the text starts over
    for ch in last:
        stream.on_text(ch)
    assert sent == [("token", {"index": 2, "text": "I"})]
    stream.node(3, "critique")  # the answer node is over: what the throttle held back goes now
    assert sent[1:] == [("token", {"index": 2, "text": "It wraps a block [a#1]."})]
    stream.node(4, "answer")
    stream.finish()
    assert len(sent) == 2  # nothing written, nothing sent
    fake.cancelled = True
    for ch in last:
        stream.on_text(ch)
    stream.finish()
    assert len(sent) == 2
