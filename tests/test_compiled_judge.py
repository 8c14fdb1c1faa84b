"""rag eval uses the compiled judge: selected on dev like the agent's roles, loaded into the judge that grades the
answers, named on stderr and in run.json. Real tiny index, real artifacts on disk; the LMs are scripted
(DummyLM, keyed by the output fields each prompt asks for) only to fix the control flow."""

from __future__ import annotations

import json

import dspy
import pytest
from dspy.utils import DummyLM

from rag.agent import artifacts
from rag.agent.module import Sieve
from rag.lm.configure import resolve_specs
from signatures import Judge

# keyed by the output keys rag.lm.adapter.SieveAdapter lists at the end of each role's prompt (rag eval configures it)
REPLIES = {
    "- relevant_chunk_ids (": {"subject": "with", "relevant_chunk_ids": ["with#001"], "relevant": True,
                               "reason": "it says so"},
    "- query (": {"query": "with statement context manager"},
    "- cited_ids (": {"cited_ids": ["with#001"], "answer": "A block [with#001]."},
    "- faithful (": {"correct": True, "faithful": True, "reason": "matches"},
}
DEMO_ANSWER = "A DEMO ANSWER ONLY THE COMPILED JUDGE HAS SEEN"


def _judge_artifact(root, models, dev_after):
    """An artifact holding only a compiled judge (one demo) whose dev agreement went 0.5 -> ``dev_after`` on 6 labels."""
    judge = dspy.Predict(Judge)
    judge.demos = [dspy.Example(question="q", reference_answer="r", candidate_answer=DEMO_ANSWER, context="c",
                                reason="labelled", correct=False, faithful=True)]
    per = {"before": [0.5] * 6, "after": [dev_after] * 6}
    scores = {"judge": {"dev_before": 0.5, "dev_after": dev_after, "test_before": 0.5, "test_after": 0.5,
                        "per_example": {"dev": per, "test": {"before": [0.5] * 4, "after": [0.5] * 4}}}}
    return artifacts.save(Sieve(None), root / "judge-only", {"models": models, "scores": scores}, judge=judge)


@pytest.fixture
def eval_setup(tmp_path, tiny_index, monkeypatch):
    from rag.config import load_settings

    monkeypatch.chdir(tmp_path)  # no sieve.toml
    from rag.lm.adapter import SieveAdapter

    lm = DummyLM(REPLIES, adapter=SieveAdapter())
    monkeypatch.setattr("rag.lm.configure.lms_for_roles", lambda settings: {r: lm for r in
                                                                        ("grader", "rewriter", "answerer", "judge")})
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"id": "a1", "type": "answerable", "question": "What does the with statement wrap?",
                                  "reference_answer": "A block.", "should_refuse": False, "split": "test",
                                  "evidence": ["wrap the execution of a block"]}) + "\n")
    models = resolve_specs(load_settings({}))
    return tmp_path, golden, models, ["index_dir=" + str(tiny_index.dir), "artifacts_dir=" + str(tmp_path / "arts")]


def _eval(tmp_path, golden, sets, capsys, use_artifact=True):
    from dspy.clients.base_lm import GLOBAL_HISTORY

    from rag.cli.cmd_eval import run_agent_eval_cli

    out = tmp_path / "run"
    code = run_agent_eval_cli("full", golden=golden, set_pairs=sets, out=out, show_progress=False, json_out=True,
                              use_artifact=use_artifact)
    judged = [str(e["messages"]) for e in GLOBAL_HISTORY if "- faithful (" in str(e["messages"])]
    return code, json.loads((out / "run.json").read_text()), capsys.readouterr().err, judged[-1]


def test_rag_eval_grades_with_the_compiled_judge_and_says_so(eval_setup, capsys):
    tmp_path, golden, models, sets = eval_setup
    _judge_artifact(tmp_path / "arts", models, dev_after=1.0)  # 6 of 6 labels better: p = 0.031, clears noise
    code, run, err, judge_prompt = _eval(tmp_path, golden, sets, capsys)
    assert code == 0
    assert "Judge: compiled judge from artifact judge-only" in err
    assert run["config"]["judge_artifact"] == "judge-only" and run["config"]["artifact"] is None  # agent uncompiled
    assert DEMO_ANSWER in judge_prompt  # the demo reached the model that judged the answer


def test_a_judge_whose_dev_gain_is_noise_is_not_used(eval_setup, capsys):
    tmp_path, golden, models, sets = eval_setup
    _judge_artifact(tmp_path / "arts", models, dev_after=0.5)  # no change on dev
    code, run, err, judge_prompt = _eval(tmp_path, golden, sets, capsys)
    assert code == 0 and "Judge: uncompiled judge" in err
    assert "skipped artifact judge-only (judge): its dev gain is within noise (judge +0.000 (p=1, n=6))" in err
    assert "Using uncompiled signatures (no artifact in artifacts/ fits with a dev gain beyond noise)" in err
    assert "judge_artifact" not in run["config"] and DEMO_ANSWER not in judge_prompt


def test_no_artifact_uses_no_compiled_judge_and_says_why_the_agent_is_uncompiled(eval_setup, capsys):
    tmp_path, golden, models, sets = eval_setup
    _judge_artifact(tmp_path / "arts", models, dev_after=1.0)  # would be selected without --no-artifact
    code, run, err, judge_prompt = _eval(tmp_path, golden, sets, capsys, use_artifact=False)
    assert code == 0
    assert "Using uncompiled signatures (--no-artifact)" in err and "Judge: uncompiled judge" in err
    assert "judge_artifact" not in run["config"] and DEMO_ANSWER not in judge_prompt


def _ask(sets, *flags):
    from typer.testing import CliRunner

    from rag.cli import app

    args = ["ask", "What does the with statement wrap?", "--no-cache"]
    for pair in sets:
        args += ["--set", pair]
    return CliRunner().invoke(app, [*args, *flags])


def test_rag_ask_prints_the_answer_and_keeps_artifact_reasons_for_verbose(eval_setup):
    """Which artifact was skipped and why is a diagnostic: with --verbose on stderr, never before every answer."""
    tmp_path, _golden, models, sets = eval_setup
    _judge_artifact(tmp_path / "arts", models, dev_after=0.5)  # skipped: its dev gain is noise
    plain = _ask(sets)
    assert plain.exit_code == 0, plain.output
    assert plain.stdout.startswith("A block [with#001].") and "Sources:" in plain.stdout
    assert "skipped artifact" not in plain.stderr and "Using " not in plain.stderr
    verbose = _ask(sets, "--verbose")
    assert verbose.exit_code == 0 and verbose.stdout == plain.stdout
    assert "skipped artifact judge-only (judge): its dev gain is within noise" in verbose.stderr
    assert "Using uncompiled signatures" in verbose.stderr
