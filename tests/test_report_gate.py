"""rag report over hand-made run directories; --gate bounds; named eval configurations."""

from __future__ import annotations

import json

import pytest
from _traces import answer, grade, item, pred, record, retrieve, rewrite

from rag.errors import ConfigError, InputError
from rag.eval.presets import (
    check_gate,
    default_threads,
    interleave_types,
    load_eval_configs,
    resolve_config,
    select_items,
)
from rag.eval.runs import append_record, open_run, read_records, write_summary
from rag.report.markdown import report

REFUSE = {"node": "refuse", "latency_ms": 0.0}


def make_run(path, name, cases, max_rewrites=2):
    open_run(path, {"config_name": name, "golden_hash": "abc", "config": {}})
    for it, p, gold, judge in cases:
        append_record(path, record(it, p, gold, judge=judge, max_rewrites=max_rewrites, k=2))
    return write_summary(path, [c[0] for c in cases], config_name=name, ghash="abc", k=2, max_rewrites=max_rewrites)


RIGHT = {"correct": True, "faithful": True, "reason": "ok"}
WRONG = {"correct": False, "faithful": True, "reason": "wrong number"}


@pytest.fixture()
def runs(tmp_path):
    base = tmp_path / "baseline-abc"
    make_run(base, "baseline", [
        (item("a1"), pred([retrieve("g1", "x"), answer(["g1", "x"])], citations=["g1"]), {"g1"}, RIGHT),
        (item("u1", "unanswerable"), pred([retrieve("z"), answer(["z"])], citations=["z"]), set(), WRONG),
    ], max_rewrites=0)
    full = tmp_path / "full-abc"
    make_run(full, "full", [
        (item("a1"), pred([retrieve("g1", "x"), grade(["g1", "x"], True, ["g1"]), answer(["g1"])], citations=["g1"]),
         {"g1"}, RIGHT),
        (item("u1", "unanswerable"), pred([retrieve("z"), grade(["z"], False), rewrite(), retrieve("z2"),
                                           grade(["z2"], False), rewrite(), retrieve("z3"), grade(["z3"], False),
                                           REFUSE], refused=True), set(), None),
    ])
    return base, full


def test_report_table_types_and_failures(runs):
    text = report(list(runs), failures=5)
    assert "| Metric | baseline | full |" in text
    # one item each: Wilson(1, 1) = [z^2/(1+z^2), 1] = [20.7%, 100%]; Wilson(0, 1) = [0, 79.3%]
    assert "| End-to-end accuracy | 100.0% [20.7%, 100.0%] n=1 | 100.0% [20.7%, 100.0%] n=1 |" in text
    assert "| Correct-refusal rate | 0.0% [0.0%, 79.3%] n=1 | 100.0% [20.7%, 100.0%] n=1 |" in text
    assert "| Agent errors | 0.0% [0.0%, 65.8%] n=2 | 0.0% [0.0%, 65.8%] n=2 |" in text  # beside the refusals
    # pooled over grade steps: the bootstrap over items is [100%, 100%] (one positive verdict, right in every
    # resample), so the wider Wilson(1, 1) interval is reported
    assert ("| Grader precision (set) | — (no grade steps: reflection off) | 100.0% [20.7%, 100.0%] n=1 grade steps |"
            in text)
    # paired over the same two items: full refused u1 (right), baseline answered it; one discordant pair, p = 1
    assert "### full vs baseline" in text
    assert ("| Right decision (correct answer, or refusal when due) | 2 | 0.500 | 1.000 | 0.500 [0.000, 1.000] | "
            "McNemar (exact) (0 vs 1 discordant) | 1 | no detectable difference at n=2 (p=1) |") in text
    assert "Recall@2 (first retrieval)" in text
    assert "### unanswerable (items: 1 / 1)" in text
    # baseline answered the unanswerable item: one failure, diagnosed, with its trace
    assert "### baseline: 1 failed of 2" in text and "no refusal path" in text
    assert "### full: 0 failed of 2" in text
    assert "```\nQ: q\n1. retrieve" in text and "2. answer" in text


def test_report_errors_on_a_directory_without_summary(tmp_path):
    with pytest.raises(InputError, match="has no summary.json"):
        report([tmp_path])


def test_gate_floors_ceilings_and_bad_files(runs, tmp_path):
    summary = json.loads((runs[0] / "summary.json").read_text())
    m, why = summary["metrics"], summary["why"]
    gate = tmp_path / "gate.json"
    gate.write_text(json.dumps({"e2e_accuracy": {"min": 0.5}, "steps_mean": {"max": 2.0},
                                "correct_refusal_rate": {"min": 0.5}, "grader_set_recall": {"min": 0.1}}))
    fails = check_gate(m, why, gate)
    assert fails == ["correct_refusal_rate = 0 is below its floor 0.5",
                     "grader_set_recall was not computed (no grade steps: reflection off); bound {'min': 0.1}"]
    gate.write_text(json.dumps({"e2e_accuracy": {"min": 0.5}, "steps_mean": {"max": 1.5}}))
    assert check_gate(m, why, gate) == ["steps_mean = 2 is above its ceiling 1.5"]
    gate.write_text(json.dumps({"accuracy": {"min": 0.5}}))
    with pytest.raises(InputError, match="unknown metric 'accuracy'"):
        check_gate(m, why, gate)
    gate.write_text(json.dumps({"e2e_accuracy": {"floor": 0.5}}))
    with pytest.raises(InputError, match=r"'e2e_accuracy' must be"):
        check_gate(m, why, gate)


def test_open_run_refuses_another_config_and_only_the_writer_cuts_a_torn_line(tmp_path):
    from rag.eval.runs import repair_torn_tail

    open_run(tmp_path, {"config_name": "full", "golden_hash": "abc", "config": {"top_k": 4}})
    with pytest.raises(InputError, match="different golden_hash"):
        open_run(tmp_path, {"config_name": "full", "golden_hash": "def", "config": {"top_k": 4}})
    with pytest.raises(InputError, match="different config \\(top_k: 4 -> 8\\)"):
        open_run(tmp_path, {"config_name": "full", "golden_hash": "abc", "config": {"top_k": 8}})
    append_record(tmp_path, {"id": "1", "scores": {}})
    with (tmp_path / "results.jsonl").open("a") as fh:
        fh.write('{"id": "2", "trunc')
    torn = (tmp_path / "results.jsonl").read_text()
    with pytest.warns(UserWarning, match=r"results\.jsonl:2: torn last line"):
        assert read_records(tmp_path) == [{"id": "1", "scores": {}}]
    assert (tmp_path / "results.jsonl").read_text() == torn  # a reader never writes
    backup = repair_torn_tail(tmp_path)
    assert (tmp_path / "results.jsonl").read_text() == '{"id": "1", "scores": {}}\n'
    assert backup is not None and backup.read_text() == torn


def test_named_configs(monkeypatch, tmp_path):
    monkeypatch.delenv("SIEVE_RERANKER", raising=False)
    monkeypatch.chdir(tmp_path)  # no sieve.toml here
    assert {"baseline", "hybrid", "hybrid_rerank", "full"} <= set(load_eval_configs())
    base, why = resolve_config("baseline")
    assert (base.mode, base.reflection, why) == ("dense", False, None)
    full, _ = resolve_config("full", ["max_rewrites=1", "top_k=6"])
    assert (full.mode, full.reflection, full.max_rewrites, full.top_k) == ("hybrid", True, 1, 6)
    skipped, why = resolve_config("hybrid_rerank")
    assert skipped is None and "--set reranker=" in why
    rr, why = resolve_config("hybrid_rerank", ["reranker=some/cross-encoder"])
    assert why is None and rr.reranker == "some/cross-encoder" and rr.reflection is False
    with pytest.raises(ConfigError, match="unknown eval config 'nope'"):
        resolve_config("nope")
    bad = tmp_path / "eval.toml"
    bad.write_text("[x]\nmodee = 'dense'\n")
    with pytest.raises(ConfigError, match=r"\[x\] unknown setting 'modee'"):
        load_eval_configs(bad)


def test_default_threads_and_split_selection():
    class LM:
        def __init__(self, model):
            self.model = model

    assert default_threads({"grader": LM("groq/openai/gpt-oss-20b"), "judge": LM("groq/qwen/qwen3-32b")}) == 4
    assert default_threads({"grader": LM("groq/openai/gpt-oss-20b"), "judge": LM("embedded/SmolLM2")}) == 1
    assert default_threads({}) == 1
    items = [item("a"), item("b")]
    items[1].split = "dev"
    assert [it.id for it in select_items(items, "dev")] == ["b"]
    assert len(select_items(items, "all")) == 2
    with pytest.raises(InputError, match="no golden items in split 'train'.*dev, test"):
        select_items(items, "train")


def test_cli_report_and_calibrate_with_a_labels_file(runs, tmp_path):
    from typer.testing import CliRunner

    from rag.cli import app

    runner = CliRunner()
    out = tmp_path / "report.md"
    res = runner.invoke(app, ["report", str(runs[0]), str(runs[1]), "--out", str(out), "--failures", "1"])
    assert res.exit_code == 0, res.output
    assert "| End-to-end accuracy | 100.0% [20.7%, 100.0%] n=1 | 100.0% [20.7%, 100.0%] n=1 |" in out.read_text()
    labels = tmp_path / "mine.jsonl"
    labels.write_text('{"id": "a1", "answer": "x", "correct": true, "faithful": true}\n'
                      '{"id": "u1", "answer": "x", "correct": true, "faithful": false}\n')
    store = tmp_path / "golden" / "judge_labels.jsonl"
    res = runner.invoke(app, ["calibrate", "--run", str(runs[0]), "--labels", str(labels), "--store", str(store),
                              "--json"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout[res.stdout.index("{"):])
    # baseline judged a1 correct (human: correct) and u1 wrong (human: correct) -> 1 of 2 agree
    assert result["n"] == 2 and result["correct"]["accuracy"] == 0.5
    assert store.is_file() and len(store.read_text().splitlines()) == 2


def test_calibrate_tells_two_runs_of_one_config_apart(runs, tmp_path):
    import shutil

    from typer.testing import CliRunner

    from rag.cli import app

    again = tmp_path / "full-again"
    shutil.copytree(runs[1], again)
    store = tmp_path / "labels.jsonl"
    store.write_text('{"id": "a1", "answer": "x", "correct": true, "faithful": true}\n')
    res = CliRunner().invoke(app, ["calibrate", "--run", str(runs[1]), "--run", str(again), "--store", str(store),
                                   "--no-label", "--json"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout[res.stdout.index("{"):])
    assert sorted(result["human_e2e"]) == ["full-abc", "full-again"]  # these records carry no config: the folders
    (pair,) = result["human_paired"]
    assert pair["n"] == 1 and pair["a_right"] == pair["b_right"]
    for folder in (runs[1], again):  # records that name their config, as rag eval writes them
        path = folder / "results.jsonl"
        path.write_text("".join(json.dumps({**json.loads(line), "config": "full"}) + "\n"
                                for line in path.read_text().splitlines() if line.strip()))
    res = CliRunner().invoke(app, ["calibrate", "--run", str(runs[1]), "--run", str(again), "--store", str(store),
                                   "--no-label", "--json"])
    result = json.loads(res.stdout[res.stdout.index("{"):])
    assert sorted(result["human_e2e"]) == ["full (full-abc)", "full (full-again)"]


def test_report_names_two_runs_of_one_config_after_their_folders(runs, tmp_path):
    import shutil

    from rag.report.markdown import report

    again = tmp_path / "full-again"
    shutil.copytree(runs[1], again)
    text = report([runs[1], again], failures=0)
    assert "| Metric | full (full-abc) | full (full-again) |" in text
    assert "### full (full-again) vs full (full-abc)" in text
    assert "| Metric | full | baseline |" in report([runs[1], runs[0]], failures=0)  # distinct configs keep their names


def test_report_shortens_long_error_details(tmp_path):
    long_error = "AdapterParseError: failed.\n\nLM Response: " + "1." * 500
    make_run(tmp_path / "r", "full", [(item("e1"), None, {"g1"}, None)])
    rec = read_records(tmp_path / "r")[0]
    assert rec["status"] == "error"
    # write a record with a long error and check the report keeps it to one short line
    (tmp_path / "r" / "results.jsonl").write_text(json.dumps({**rec, "error": long_error}) + "\n")
    text = report([tmp_path / "r"])
    line = next(x for x in text.splitlines() if x.startswith("- diagnosis: **agent error**"))
    assert len(line) < 360 and line.endswith("…")


def test_shipped_ci_gate_holds_on_the_measured_full_run_and_can_trip():
    """gate_ci.json's bounds are the committed measured full run of the default model on the whole test split,
    each moved 0.10 towards worse (README): that run passes; a run 0.2 worse on each bounded metric fails every bound."""
    from pathlib import Path

    from rag.eval.presets import CONFIGS_FILE

    gate = CONFIGS_FILE.parent / "gate_ci.json"
    run = Path(__file__).parents[1] / "benchmarks" / "results" / "eval-full-qwen1.5b-graded" / "summary.json"
    summary = json.loads(run.read_text())
    assert summary["n_selected"] == 62 and summary["complete"]
    assert check_gate(summary["metrics"], summary["why"], gate) == []
    for name, bound in json.loads(gate.read_text()).items():  # each bound is the measured value -/+ 0.10, rounded
        measured = summary["metrics"][name]
        target = max(measured - 0.10, 0.0) if "min" in bound else min(measured + 0.10, 1.0)
        assert bound.get("min", bound.get("max")) == pytest.approx(target, abs=0.001), name
    bounds = json.loads(gate.read_text())
    assert {"grader_set_precision", "false_refusal_rate", "error_rate"} <= set(bounds)
    worse = {**summary["metrics"], **{k: summary["metrics"][k] - 0.2 if "min" in b else summary["metrics"][k] + 0.2
                                      for k, b in bounds.items()}}
    assert len(check_gate(worse, summary["why"], gate)) == len(bounds)
    for name, bound in bounds.items():  # every bound is reachable: within [0, 1], not at its edge
        assert 0 < bound.get("min", bound.get("max")) < 1, name


def test_default_run_dir_names(monkeypatch, tmp_path):
    from rag.eval.runs import default_run_dir

    monkeypatch.setenv("SIEVE_HOME", str(tmp_path))
    assert default_run_dir("full", "abc") == tmp_path / "runs" / "full-abc"
    one = default_run_dir("full", "abc", ["top_k=8", "mode=bm25"])
    assert one.name.startswith("full-abc-set") and one == default_run_dir("full", "abc", ["mode=bm25", "top_k=8"])
    assert one != default_run_dir("full", "abc", ["top_k=6"])


def test_limit_takes_a_stratified_sample_of_types():
    from types import SimpleNamespace as NS

    items = [NS(id=f"{t[0]}{i}", type=t) for t in ("answerable", "vague", "unanswerable") for i in range(3)]
    assert [it.id for it in interleave_types(items)][:4] == ["a0", "v0", "u0", "a1"]
    assert sorted(it.id for it in interleave_types(items)) == sorted(it.id for it in items)


def test_eval_help_shows_its_defaults():
    """Help text in square brackets is rich markup: "[default: x]" printed as nothing ("Golden set JSONL .")."""
    from typer.testing import CliRunner

    from rag.cli import app

    res = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "220", "NO_COLOR": "1"})
    assert res.exit_code == 0
    for text in ("Golden set JSONL (default: golden/python_ref.jsonl).", "Index folder (default: $SIEVE_HOME/index).",
                 "Cut-off k (default: top_k = 4).", "a sample stratified by question type", "--repeat"):
        assert text in res.stdout, text


def test_a_setting_added_by_a_later_version_resumes_only_at_its_default(tmp_path):
    """A run made before a setting existed resumes when the new run has that setting at its default
    (the old run could only have behaved that way), and is refused when it differs."""
    from rag.config import setting_defaults

    old = {"top_k": 4, "embedding_runtime": "onnx"}
    open_run(tmp_path, {"config_name": "full", "golden_hash": "abc", "config": old})
    at_default = {**old, "embedding_precision": setting_defaults()["embedding_precision"]}
    open_run(tmp_path, {"config_name": "full", "golden_hash": "abc", "config": at_default})  # no error
    with pytest.raises(InputError, match="different config"):
        open_run(tmp_path, {"config_name": "full", "golden_hash": "abc", "config": {**old, "embedding_precision": "int8"}})
    with pytest.raises(InputError, match="different config"):  # a key the old run had is never dropped silently
        open_run(tmp_path, {"config_name": "full", "golden_hash": "abc", "config": {"top_k": 4}})


def test_a_setting_whose_default_changed_behaviour_resumes_only_at_the_old_behaviour(tmp_path):
    """router and critic_checks arrived with defaults that do something new (schema cues, the number check): a run
    made before them used the model for both, so it resumes only with them set to "model"."""
    old = {"top_k": 4, "data_route": "auto"}
    open_run(tmp_path, {"config_name": "full", "golden_hash": "abc", "config": old})
    with pytest.raises(InputError, match="router: None -> 'cues'"):
        open_run(tmp_path, {"config_name": "full", "golden_hash": "abc",
                            "config": {**old, "router": "cues", "critic_checks": "model"}})
    open_run(tmp_path, {"config_name": "full", "golden_hash": "abc",
                        "config": {**old, "router": "model", "critic_checks": "model"}})  # no error


def test_report_shows_what_each_rewrite_bought(runs):
    text = report(list(runs))
    section = text.split("## What each rewrite bought")[1].split("## Failures")[0]
    # full's unanswerable item rewrote twice and was refused: 320 of the run's 740 agent ms from the first
    # rewrite on, 160 from the second; the baseline never rewrote, so it has no row
    assert "| full | 1 | 1 | 1 | 0 | 0.3 s (43.2%) |" in section
    assert "| full | 2 | 1 | 1 | 0 | 0.2 s (21.6%) |" in section
    assert "| baseline |" not in section


def test_rewrite_depths_count_the_answers_each_rewrite_led_to():
    from rag.report.rewrite_depth import rewrite_depths

    saved = record(item("a2"), pred([retrieve("x"), grade(["x"], False), rewrite(), retrieve("g1"),
                                     grade(["g1"], True, ["g1"]), answer(["g1"])], citations=["g1"]), {"g1"})
    lost = record(item("a3"), pred([retrieve("y"), grade(["y"], False), rewrite(), retrieve("y2"), grade(["y2"], False),
                                    rewrite(), retrieve("y3"), grade(["y3"], False), REFUSE], refused=True), {"g3"})
    failed = record(item("a4"), None, {"g4"}, error="boom")  # not finished: not counted
    first, second = rewrite_depths([{**saved, "config": "full"}, lost, failed])
    assert (first["depth"], first["reached"], first["unanswerable"], first["answered"]) == (1, 2, 0, 1)
    assert first["answered_keys"] == [("full", "a2")]
    # a2: 360 ms from its rewrite on; a3: 320 from the first, 160 from the second; 470 + 430 ms in all
    assert first["seconds"] == pytest.approx(0.68) and first["share"] == pytest.approx(680 / 900)
    assert (second["reached"], second["answered"], second["answered_keys"]) == (1, 0, [])
    assert second["seconds"] == pytest.approx(0.16)
    assert rewrite_depths([]) == []
