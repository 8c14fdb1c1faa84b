"""``rag eval --ray`` on a real local Ray cluster (2 CPUs), and the cluster-wide rate limiter against a real
loopback chat server. One cluster serves the whole module; it is shut down at the end.

- a distributed run of the scripted program equals the local run item for item;
- a worker process killed mid-item loses nothing and doubles nothing (its item runs on a fresh worker);
- two workers sharing the cluster limiter never send more than R requests in a window (as the server counts
  them), where two private limiters would; a spent daily quota stops the other worker before its next call.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

ray = pytest.importorskip("ray", reason='Ray is an optional extra: pip install -e ".[ray]"')
pytestmark = pytest.mark.slow  # a real cluster: its processes and workers take seconds to start (minutes, loaded)

from rag.config import Settings  # noqa: E402
from rag.distributed.eval import RayRunner  # noqa: E402
from rag.eval.golden import GoldenItem  # noqa: E402
from rag.eval.runner import run_eval  # noqa: E402
from rag.eval.runs import read_records  # noqa: E402
from rag.ingest.chunking import Chunk  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.ray_support import ScriptedProgram  # noqa: E402
from tests.test_evaluate import DOCS, ITEMS  # noqa: E402

# Fields that differ between any two runs (timings), dropped before records are compared.
VOLATILE = {"wall_ms", "finished_at", "latency_ms", "latency_s", "latency_by_node", "ms", "seconds", "started_at",
            "elapsed_ms", "duration_ms", "total_ms"}


@pytest.fixture(scope="module")
def cluster():
    from rag.distributed.cluster import connect

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT)  # workers import tests.ray_support
    try:
        yield connect("local", num_cpus=2)
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    from rag.index.build import build_index

    root = tmp_path_factory.mktemp("ray-eval-index") / "index"
    chunks = [Chunk(id=cid, text=text, title=title, source=cid.split("#")[0]) for cid, (title, text) in DOCS.items()]
    build_index(chunks, root, Settings(index_dir=root), show_progress=False)
    return str(root)


def items(copies: int = 2) -> list[GoldenItem]:
    """The scripted items without the outage one, ``copies`` times under distinct ids."""
    base = [it for it in ITEMS if it.id != "boom"]
    return [GoldenItem(**{**it.__dict__, "id": f"{it.id}-{n}", "question": it.question + (f" [copy {n}]" if n else "")})
            for n in range(copies) for it in base]


def normal(value):
    """A record without its timings, for comparing two runs."""
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normal(v) for v in value]
    return value


def first_difference(a, b, path="record"):
    """Where two JSON values first differ (for a readable assertion message), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys()):
            found = first_difference(a.get(key), b.get(key), f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := first_difference(x, y, f"{path}[{i}]"))), None)
    return None if a == b else f"{path}: {a!r} != {b!r}"


def by_id(out):
    records = read_records(out)
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)), f"an item was written twice: {ids}"
    return {r["id"]: normal(r) for r in records}


def local_run(index_dir, selected, out):
    agent, judge, chunks = ScriptedProgram(index_dir)()
    return run_eval(selected, agent, None, out, "full", chunks=chunks, ghash="h", k=2, show_progress=False,
                    answer_judge=judge)


def test_distributed_run_equals_local_run_item_for_item(cluster, index_dir, tmp_path):
    selected = items()
    local = local_run(index_dir, selected, tmp_path / "local")
    runner = RayRunner(ScriptedProgram(index_dir), workers=2, show_progress=False)
    agent, _, _ = ScriptedProgram(index_dir)()
    distributed = run_eval(selected, agent, None, tmp_path / "ray", "full", ghash="h", k=2, show_progress=False,
                           runner=runner)
    assert len(runner.pids) == 2 and os.getpid() not in runner.pids.values()  # really on two other processes
    assert by_id(tmp_path / "ray") == by_id(tmp_path / "local"), first_difference(by_id(tmp_path / "ray"), by_id(tmp_path / "local"))
    assert set(by_id(tmp_path / "ray")) == {it.id for it in selected}
    timeless = lambda metrics: {k: v for k, v in metrics.items() if "latency" not in k}  # noqa: E731
    assert timeless(distributed["metrics"]) == timeless(local["metrics"]) and distributed["complete"]


KILL_WAIT_S = 900  # at most this long for the first record before the worker is killed


def test_a_worker_killed_mid_item_loses_and_doubles_nothing(cluster, index_dir, tmp_path):
    selected = items(3)  # 12 items, ~4 LM replies each at 0.15 s: about 1 s of work per item
    runner = RayRunner(ScriptedProgram(index_dir, delay=0.15), workers=2, show_progress=False)
    out = tmp_path / "ray"
    killed: list[int] = []

    def kill_one_when_the_first_item_is_written():
        deadline = time.monotonic() + KILL_WAIT_S  # workers start in seconds, or minutes on a loaded machine
        while time.monotonic() < deadline and not (out / "results.jsonl").is_file():
            time.sleep(0.05)
        if not runner.pids:
            return
        pid = next(iter(runner.pids.values()))
        os.kill(pid, signal.SIGKILL)  # the process dies mid-item, as on a lost node
        killed.append(pid)

    killer = threading.Thread(target=kill_one_when_the_first_item_is_written, daemon=True)
    killer.start()
    agent, _, _ = ScriptedProgram(index_dir)()
    summary = run_eval(selected, agent, None, out, "full", ghash="h", k=2, show_progress=False, runner=runner)
    killer.join(timeout=5)
    assert killed and len(runner.died) == 1  # one item's worker died under it...
    assert len(runner.pids) == 3  # ...and a fresh worker took its place
    records = by_id(out)  # (asserts no id twice)
    assert set(records) == {it.id for it in selected} and summary["complete"]
    local_run(index_dir, selected, tmp_path / "local")
    local = by_id(tmp_path / "local")
    assert records == local, first_difference(records, local)  # the re-run item is the same as a local run's


# ---------------------------------------------------------------- one rate limit for the whole cluster
RPM, WINDOW, CALLS = 3, 4.0, 6  # R requests per (shrunk) window; calls per worker
TRANSIT_S = 1.0  # how much later than its grant a request may reach the server (0.5 s was exceeded under load)


@pytest.fixture(scope="module")
def server():
    from tests.delay_server import DelayServer

    srv = DelayServer(delay=0.05)
    yield srv
    srv.stop()


def callers(server, ledger, limiter=None, n=2):
    from tests.ray_support import Caller

    remote = ray.remote(Caller).options(num_cpus=0.5, max_restarts=0)
    return [remote.remote(server.url, str(ledger), RPM, limiter) for _ in range(n)]


def test_workers_sharing_the_cluster_limiter_never_exceed_its_rate(cluster, server, tmp_path):
    from rag.distributed.limiter import limiter_actor
    from rag.usage.ledger import Ledger

    # Control: each worker with its own limiter (R per 60 s each) lets 2R through within one minute.
    server.reset()
    own = callers(server, tmp_path / "own.sqlite")
    assert ray.get([c.call.remote(RPM) for c in own]) == [["ok"] * RPM] * 2
    assert server.max_in_window(60.0) == 2 * RPM
    for c in own:
        ray.kill(c)

    server.reset()
    limiter = limiter_actor(window=WINDOW)
    shared = callers(server, tmp_path / "shared.sqlite", limiter)
    started = time.monotonic()
    assert ray.get([c.call.remote(CALLS) for c in shared]) == [["ok"] * CALLS] * 2
    took = time.monotonic() - started
    # The server saw every call, never more than R within a window (less TRANSIT_S: the limiter spaces the sends,
    # the server times the arrivals)...
    assert len(server.arrivals) == 2 * CALLS
    assert server.max_in_window(WINDOW - TRANSIT_S) <= RPM
    assert took >= (2 * CALLS / RPM - 1) * WINDOW - TRANSIT_S  # ...so 12 calls at 3 per 4 s take at least 12 s
    assert ray.get(limiter.stats.remote())["granted"] == {"openai/gpt-oss-20b": 2 * CALLS}
    # The usage ledger counts each worker's calls once.
    rows = Ledger(tmp_path / "shared.sqlite").daily()
    assert sum(r.calls for r in rows) == 2 * CALLS and sum(r.failed for r in rows) == 0
    for c in shared:
        ray.kill(c)
    ray.kill(limiter)


def test_a_spent_daily_quota_stops_every_worker_before_its_next_call(cluster, server, tmp_path):
    from rag.distributed.limiter import limiter_actor

    server.reset()
    limiter = limiter_actor(window=WINDOW)
    first, second = callers(server, tmp_path / "ledger.sqlite", limiter)
    server.fail_next(429, '{"error": {"message": "Rate limit reached for tokens per day (TPD)", '
                          '"code": "rate_limit_exceeded"}}')
    assert ray.get(first.call.remote(1)) == ["DailyQuotaExhausted"]  # reported to the cluster's limiter
    assert ray.get(second.call.remote(2)) == ["DailyQuotaExhausted"] * 2  # refused before sending anything
    assert len(server.arrivals) == 1
    assert "per day" in ray.get(limiter.stats.remote())["stopped"]
    for actor in (first, second, limiter):
        ray.kill(actor)


# ---------------------------------------------------------------- rag index --ray
def test_index_built_on_ray_gives_the_same_top_10_for_every_golden_question(cluster, tmp_path):
    """The workers embed with the index's own encoder (the ONNX export the driver made before fanning out, loaded
    from the shared SIEVE_HOME) in the batches a local build uses, so "the same retrieval results" holds in its
    strictest form: the same vectors bit for bit, hence the same index files byte for byte, hence for every golden
    question and every mode the same top 10 - ids, ranks and scores exactly equal, not merely close."""
    import json

    import numpy as np

    from rag.distributed.embed import ray_embedder
    from rag.eval.golden import load_golden
    from rag.index.build import build_index
    from rag.ingest.chunking import chunk_documents
    from rag.ingest.corpus import load_builtin_topics
    from rag.retrieval.retriever import Retriever

    settings = Settings(index_dir=tmp_path / "local", chunk_size=4000, chunk_overlap=0)
    chunks = chunk_documents(load_builtin_topics(), settings.chunk_size, settings.chunk_overlap)
    local = build_index(chunks, tmp_path / "local", settings, show_progress=False)
    embedder = ray_embedder("local", "default", workers=2, shard_batches=1, show_progress=False)
    distributed = build_index(chunks, tmp_path / "ray", settings.replace(index_dir=tmp_path / "ray"),
                              show_progress=False, embedder=embedder)
    assert len(embedder.pids) == 2 and os.getpid() not in embedder.pids and len(embedder.parts) > 2
    encoder = local.manifest["embedding"]["encoder"]
    assert encoder["runtime"] == "onnxruntime" and distributed.manifest["embedding"] == local.manifest["embedding"]
    assert np.array_equal(np.asarray(local.embeddings), np.asarray(distributed.embeddings))  # bit for bit
    for name in ("embeddings.npy", "dense.faiss", "chunks.jsonl"):
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "ray" / name).read_bytes(), name
    questions = [it.question for it in load_golden(ROOT / "golden" / "python_ref.jsonl")]
    assert len(questions) > 100
    for mode in ("dense", "hybrid", "bm25"):
        a, b = Retriever(local, mode=mode, top_k=10), Retriever(distributed, mode=mode, top_k=10)
        for q in questions:
            top_a = [(h.rank, h.chunk_id, h.score) for h in a.search(q)]
            top_b = [(h.rank, h.chunk_id, h.score) for h in b.search(q)]
            assert len(top_a) == 10 and top_a == top_b, (mode, q)
    assert json.loads((tmp_path / "ray" / "manifest.json").read_text())["counts"] == local.manifest["counts"]


# ---------------------------------------------------------------- the usage ledger
def loopback_settings(index_dir, server):
    """Every role a hosted (Groq) model served by the loopback server; bm25 retrieval; no LM cache."""
    model = "groq/openai/gpt-oss-20b"
    return Settings(index_dir=index_dir).replace(
        mode="bm25", cache=False, top_k=2, grader_model=model, rewriter_model=model, answerer_model=model,
        judge_model=model, groq_base_url=server.url, rate_limits="*=100000/100000000")


def test_the_driver_ledger_counts_every_worker_call_once(cluster, server, index_dir, tmp_path):
    """N items across 2 workers: the driver's usage ledger gains exactly one row per request the server saw (the
    workers share the driver's SIEVE_HOME here, so a worker that also wrote its own rows would double them)."""
    from rag.agent.module import Sieve
    from rag.usage.ledger import Ledger
    from tests.ray_support import LoopbackProgram

    def calls() -> int:
        return sum(r.calls + r.failed for r in Ledger().daily())

    settings = loopback_settings(index_dir, server)
    selected = items(2)  # 8 items
    runner = RayRunner(LoopbackProgram(settings), workers=2, show_progress=False)
    before = calls()
    server.reset()
    agent = Sieve(None, max_rewrites=settings.max_rewrites, top_k=settings.top_k)
    summary = run_eval(selected, agent, None, tmp_path / "run", "full", ghash="h", k=2, runner=runner,
                       show_progress=False)
    assert summary["complete"] and len(runner.pids) == 2
    records = by_id(tmp_path / "run")
    assert set(records) == {it.id for it in selected}
    made = len(server.arrivals)
    assert made >= 2 * len(selected)  # several calls per item (answer, judge, ...)
    assert runner.usage_rows == made and calls() - before == made
    assert len(runner.usage_keys) == made  # one key per call, from both workers


def test_the_calls_of_a_worker_killed_mid_item_are_in_the_driver_ledger_once(cluster, server, index_dir, tmp_path):
    """A worker SIGKILLed mid-item, right after one of that item's calls: its item runs again elsewhere, and the
    driver's ledger still gains exactly one row per request the server saw, the killed attempt's included. (The
    worker kills itself, between two calls: a call in flight at its death reaches the server but has no row.)"""
    from rag.agent.module import Sieve
    from rag.usage.ledger import Ledger
    from tests.ray_support import DyingLoopbackProgram

    ledger = Ledger(tmp_path / "usage.sqlite")
    settings = loopback_settings(index_dir, server)
    selected = items(2)  # 8 items
    flag = tmp_path / "killed"
    runner = RayRunner(DyingLoopbackProgram(settings, flag=str(flag), after=3), workers=2, show_progress=False,
                       ledger=ledger)
    server.reset()
    agent = Sieve(None, max_rewrites=settings.max_rewrites, top_k=settings.top_k)
    summary = run_eval(selected, agent, None, tmp_path / "run", "full", ghash="h", k=2, runner=runner,
                       show_progress=False)
    assert flag.exists() and len(runner.died) == 1 and len(runner.pids) == 3  # one died mid-item, replaced
    records = by_id(tmp_path / "run")  # (asserts no id twice)
    assert set(records) == {it.id for it in selected} and summary["complete"]
    made = len(server.arrivals)
    assert runner.usage_rows == made and sum(r.calls + r.failed for r in ledger.daily()) == made


# ---------------------------------------------------------------- Ctrl-C on the driver
INTERRUPT_WAIT_S = 900  # at most this long for the first records before the driver is interrupted


def golden_file(path, selected):
    import json

    with open(path, "w", encoding="utf-8") as f:
        for it in selected:
            f.write(json.dumps({"id": it.id, "type": it.type, "question": it.question,
                                "reference_answer": it.reference_answer, "should_refuse": it.should_refuse,
                                "evidence": list(it.evidence), "split": "test"}) + "\n")
    return path


def test_ctrl_c_on_the_driver_leaves_a_run_that_resumes(cluster, index_dir, tmp_path):
    """``rag eval --ray ADDRESS`` in its own process (joining this cluster, every role on a loopback server that
    answers after 0.3 s), interrupted with SIGINT once some items are written: it exits 130 with one line that
    says how to resume and no traceback; results.jsonl holds whole lines, no id twice; the same command then
    resumes and completes with every item exactly once."""
    import json
    import subprocess
    import sys

    from tests.delay_server import DelayServer

    server = DelayServer(delay=0.3)
    try:
        selected = items(4)  # 16 items, a few seconds each
        golden = golden_file(tmp_path / "golden.jsonl", selected)
        out = tmp_path / "run"
        settings = loopback_settings(index_dir, server)
        sets = [f"{k}={getattr(settings, k)}" for k in ("mode", "top_k", "grader_model", "rewriter_model",
                                                        "answerer_model", "judge_model", "groq_base_url", "rate_limits")]
        command = [sys.executable, "-m", "rag", "eval", "--config", "full", "--golden", str(golden), "--split", "test",
                   "--index-dir", index_dir, "--no-artifact", "--out", str(out), "--workers", "2",
                   "--ray", ray.get_runtime_context().gcs_address, "--set", "cache=false"]
        for pair in sets:
            command += ["--set", pair]
        env = {**os.environ, "GROQ_API_KEY": "loopback-not-a-key", "PYTHONPATH": str(ROOT)}

        def start():
            return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

        first = start()
        results = out / "results.jsonl"
        deadline = time.monotonic() + INTERRUPT_WAIT_S
        while time.monotonic() < deadline and first.poll() is None:
            if results.is_file() and len(results.read_text(encoding="utf-8").splitlines()) >= 2:
                break
            time.sleep(0.1)
        assert first.poll() is None, first.communicate()[1][-3000:]
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=300)
        lines = results.read_text(encoding="utf-8").splitlines()
        assert first.returncode == 130, err[-3000:]
        assert "Traceback" not in err and "run the same command again to resume" in err.splitlines()[-1], err[-3000:]
        ids = [json.loads(line)["id"] for line in lines]  # every line whole JSON
        assert results.read_text(encoding="utf-8").endswith("\n")
        assert len(ids) == len(set(ids)) and 2 <= len(ids) < len(selected), ids
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        assert summary["n_done"] == len(ids) and not summary["complete"]

        second = start()
        _, err = second.communicate(timeout=INTERRUPT_WAIT_S)
        assert second.returncode == 0, err[-3000:]
        assert f"{len(ids)} of {len(selected)} items already done" in err
        records = by_id(out)  # (asserts no id twice)
        assert set(records) == {it.id for it in selected}
        assert [json.loads(line)["id"] for line in results.read_text(encoding="utf-8").splitlines()][:len(ids)] == ids
        assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["complete"]
    finally:
        server.stop()
