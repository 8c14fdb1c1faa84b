"""Cache hits are charged the latency measured when the call really ran."""

from __future__ import annotations

from _traces import answer, grade, item, pred, retrieve

from rag.eval.agent_metrics import score_item
from rag.usage.latency import LatencyLedger


def test_ledger_stamps_cached_steps_across_sessions(tmp_path):
    path = tmp_path / "cache" / "latency_ledger.jsonl"
    first = [retrieve("g1"), grade(["g1"], True, ["g1"], latency=700.0), answer(["g1"], latency=1500.0)]
    LatencyLedger(path).apply("q", first)
    assert "original_latency_ms" not in first[1]
    again = [retrieve("g1"), grade(["g1"], True, ["g1"], latency=2.0, cached=True), answer(["g1"], latency=1.0)]
    again[2]["cached"] = True
    other = [grade(["x"], False, latency=3.0, cached=True)]  # another prompt: nothing known, nothing stamped
    ledger = LatencyLedger(path)  # a new session reads what the first one wrote
    ledger.apply("q", again)
    ledger.apply("q", other)
    assert (again[1]["original_latency_ms"], again[2]["original_latency_ms"]) == (700.0, 1500.0)
    assert "original_latency_ms" not in other[0]
    s = score_item(item("a"), pred(again, citations=["g1"]), {"g1"}, k=1)
    assert s["latency_ms"] == 10.0 + 700.0 + 1500.0 and s["cached_steps"] == 2
    path.write_text(path.read_text() + '{"key": "torn')
    assert len(LatencyLedger(path).known) == 2
