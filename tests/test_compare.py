"""rag.report.compare on a real artifact written by rag.agent.artifacts.save, and on the committed runs fixture."""

from __future__ import annotations

from pathlib import Path

import dspy
import pandas as pd
import pytest

from rag.agent import artifacts
from rag.report import compare
from rag.report.analysis import load_runs

FIXTURE_RUNS = Path(__file__).parent / "fixtures" / "runs"
NEW_GRADER = "Say relevant only when a passage states the answer outright."


@pytest.fixture(scope="module")
def artifact_dir(tmp_path_factory) -> Path:
    """One compiled-looking artifact: the grader's instructions rewritten and one demo; a judge with a demo."""
    from rag.agent.module import Sieve
    from signatures import Judge

    agent = Sieve(None)
    agent.grade.signature = agent.grade.signature.with_instructions(NEW_GRADER)
    agent.grade.demos = [dspy.Example(question="What does break do?", context="[break#000] break ends the loop",
                                      reason="passage states it", relevant=True, relevant_chunk_ids=["break#000"])]
    judge = dspy.Predict(Judge)
    judge.demos = [dspy.Example(question="q", reference_answer="r", candidate_answer="a", context="c", reason="ok",
                                correct=True, faithful=True)]
    root = tmp_path_factory.mktemp("artifacts")
    manifest = {"name": "test-bootstrap", "created": "2026-11-29T20:00:00+00:00", "optimizer": "bootstrap",
                "models": {"grader": "embedded/smollm2", "rewriter": "embedded/smollm2"},
                "scores": {"grader": {"dev_before": 0.5, "dev_after": 0.75, "test_before": 0.4, "test_after": 0.3},
                           "rewriter": {"dev_before": 0.2, "dev_after": None, "test_before": 0.1, "test_after": 0.1}}}
    artifacts.save(agent, root / "test-bootstrap", manifest, judge=judge)
    return root


def test_artifact_table_scores_and_deltas(artifact_dir):
    table = compare.artifact_table(artifact_dir).set_index("role")
    assert list(table.index) == ["grader", "rewriter"]
    assert table.loc["grader", "dev_delta"] == pytest.approx(0.25)
    assert table.loc["grader", "test_delta"] == pytest.approx(-0.1)
    assert pd.isna(table.loc["rewriter", "dev_delta"])  # after not measured: no delta
    assert table.loc["grader", "model"] == "embedded/smollm2" and table.loc["grader", "optimizer"] == "bootstrap"


def test_artifact_table_empty_folder(tmp_path):
    table = compare.artifact_table(tmp_path)
    assert table.empty and "test_delta" in table.columns


def test_artifact_prompts_show_changed_instructions_and_demos(artifact_dir):
    art = compare.artifact_for(None, artifact_dir)
    assert art is not None and art.name == "test-bootstrap"
    prompts = compare.artifact_prompts(art).set_index("predictor")
    assert set(prompts.index) == {"grade", "rewrite", "respond", "judge"}
    assert prompts.loc["grade", "instructions"] == NEW_GRADER and prompts.loc["grade", "changed"]
    assert not prompts.loc["rewrite", "changed"] and prompts.loc["rewrite", "n_demos"] == 0
    assert prompts.loc["grade", "n_demos"] == 1 and prompts.loc["judge", "n_demos"] == 1
    assert prompts.loc["grade", "demos"][0]["relevant_chunk_ids"] == ["break#000"]
    text = compare.render_prompts(prompts.reset_index())
    assert "== grade (grader): instructions changed by the optimizer" in text
    assert "relevant_chunk_ids: ['break#000']" in text


def test_uncompiled_prompts_are_the_signatures():
    from signatures import Answerer, Grader

    prompts = compare.artifact_prompts(None).set_index("predictor")
    assert prompts.loc["grade", "instructions"] == Grader.instructions
    assert prompts.loc["respond", "instructions"] == Answerer.instructions
    assert not prompts.changed.any() and (prompts.n_demos == 0).all()


def test_artifact_for_no_artifacts(tmp_path):
    assert compare.artifact_for(None, tmp_path) is None


def test_pick_pair_falls_back_to_two_configs_and_needs_two_runs():
    runs = load_runs(FIXTURE_RUNS)
    before, after, why = compare.pick_pair(runs)
    assert (before.name, after.name) == (runs[0].name, runs[1].name) and "no compiled run" in why
    one = load_runs(sorted(FIXTURE_RUNS.iterdir())[0])
    assert compare.pick_pair(one)[:2] == (None, None) and "needs two runs" in compare.pick_pair(one)[2]
    # a notebook on a fresh machine: every comparison is empty rather than an error
    assert compare.paired(None, None).empty and compare.flips(None, None).empty
    assert compare.metric_deltas(None, None).empty and compare.render_flips(None, None) == "no two runs to compare\n"
