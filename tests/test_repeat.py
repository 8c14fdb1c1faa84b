"""rag eval --repeat N: N ordinary run folders with the LM cache off, and the spread of each metric."""

from __future__ import annotations

import json

import dspy
import pytest

from rag.report.repeat import spread
from tests.test_compiled_judge import eval_setup  # noqa: F401  (the fixture: tiny index, scripted LMs, golden)


def test_spread_by_hand():
    runs = [{"metrics": {"e2e_accuracy": 0.5, "loop_rate": None}}, {"metrics": {"e2e_accuracy": 1.0, "loop_rate": None}},
            {"metrics": {"e2e_accuracy": 0.75, "loop_rate": 0.2}}]
    s = spread(runs)
    # mean 0.75; sample sd = sqrt((0.0625 + 0.0625 + 0) / 2) = 0.25
    assert s["e2e_accuracy"] == {"values": [0.5, 1.0, 0.75], "n": 3, "mean": 0.75, "sd": pytest.approx(0.25),
                                 "min": 0.5, "max": 1.0}
    assert s["loop_rate"] == {"values": [None, None, 0.2], "n": 1, "mean": 0.2, "sd": None, "min": 0.2, "max": 0.2}


@pytest.fixture
def cache_restored():
    yield
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True)


def test_repeat_runs_n_times_with_the_cache_off(eval_setup, capsys, cache_restored):  # noqa: F811
    from rag.cli.cmd_eval import run_agent_eval_cli

    tmp_path, golden, _, sets = eval_setup
    out = tmp_path / "rep"
    code = run_agent_eval_cli("full", golden=golden, set_pairs=sets, out=out, show_progress=False, repeat=2)
    captured = capsys.readouterr()
    assert code == 0
    assert dspy.cache.enable_disk_cache is False and dspy.cache.enable_memory_cache is False
    for i in (1, 2):
        summary = json.loads((out / f"repeat-{i}" / "summary.json").read_text())
        assert summary["complete"] and summary["n_done"] == 1
    assert "full: 2 repeats (LM cache off), 1 items each" in captured.out
    line = next(x for x in captured.out.splitlines() if x.startswith("Steps per query (mean)"))
    assert line.split()[4:] == ["3.00", "0.00", "3.00", "-", "3.00", "3.00,", "3.00"]  # mean, sd, min - max, each
    with pytest.raises(Exception, match="--repeat must be at least 1"):
        run_agent_eval_cli("full", golden=golden, set_pairs=sets, out=tmp_path / "zero", show_progress=False, repeat=-1)
