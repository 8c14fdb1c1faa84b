"""The automatic review pass of a golden set (rag golden review FILE --auto, rag.curate.review.auto_review_golden), the
review's report (rag.report.golden_checks.review_summary) and rag eval --reviewed-by. Real tiny index; the reviewing
model is a scripted DummyLM keyed by the question each prompt holds, so which item got which reply shows in what was
written."""

from __future__ import annotations

import json

import pytest
from dspy.utils import DummyLM

from rag.curate.review import SAME_REVIEWER, auto_review_golden, keep_reviewed, review_golden, review_passages
from rag.errors import InputError
from rag.eval.golden import load_golden
from rag.report.golden_checks import review_lines, review_summary
from tests.catalogue_support import check, run_cli
from tests.test_golden_draft import script_agent

MODEL = "judge-model"
ITEMS = [
    {"id": "r1", "type": "answerable", "question": "What does the with statement call before the block runs?",
     "reference_answer": "__enter__.", "relevant_chunk_ids": ["with#001"], "seed_chunk_id": "with#001",
     "split": "test", "drafted_by": "drafter-model"},
    {"id": "r2", "type": "vague", "question": "how do i make a function with no name",
     "reference_answer": "With a lambda expression.", "relevant_chunk_ids": ["lambda#001"],
     "seed_chunk_id": "lambda#001", "split": "test", "drafted_by": "drafter-model"},
    {"id": "r3", "type": "unanswerable", "question": "Where can yield expressions be used?",
     "reference_answer": "Not covered by the indexed documents.", "should_refuse": True, "relevant_chunk_ids": [],
     "seed_chunk_id": "yield#001", "split": "test", "drafted_by": "drafter-model"},
    {"id": "r4", "type": "answerable", "question": "What does the nonlocal statement refer to?",
     "reference_answer": "Variables bound in the nearest enclosing scope.", "relevant_chunk_ids": ["nonlocal#001"],
     "seed_chunk_id": "nonlocal#001", "split": "test", "drafted_by": "drafter-model"},
    {"id": "r5", "type": "answerable", "question": "Which method implements len()?", "reference_answer": "__len__.",
     "relevant_chunk_ids": ["len#001"], "seed_chunk_id": "len#001", "split": "test", "drafted_by": "drafter-model",
     "review": "reject", "reviewed_by": "human"},
]
REPLIES = {  # r4's reply is unusable: keep is no boolean
    "r1": {"reason": "clear, and the passage states __enter__", "keep": True},
    "r2": {"reason": "loose wording, the passage states lambda", "keep": True},
    "r3": {"reason": "the passage answers it: in a function body", "keep": False},
    "r4": {"reason": "hmm", "keep": "perhaps"},
}


def _golden(path, items=ITEMS):
    path.write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
    return path


def reviewer(replies=REPLIES, items=ITEMS):
    """A DummyLM answering each item's prompt with its scripted reply, keyed by the question."""
    by_question = {it["id"]: it["question"] for it in items}
    return DummyLM({f"[[ ## question ## ]]\n{by_question[i]}": reply for i, reply in replies.items()})


def _rows(path):
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def _auto(path, chunks, lm=None, **kw):
    log = []
    result = auto_review_golden(path, lm=lm or reviewer(), model=kw.pop("model", MODEL), chunks=chunks,
                                show_progress=kw.pop("show_progress", False), log=log.append, **kw)
    return result, log


def test_the_model_keeps_and_rejects_with_its_name_and_reason_and_never_touches_a_human_decision(tmp_path, tiny_index):
    path = _golden(tmp_path / "mine.jsonl")
    result, log = _auto(path, tiny_index.chunks)
    assert result.decided == {"accept": 2, "reject": 1} and result.reviewed_before == 1 and result.calls == 4
    rows = _rows(path)
    for i, decision in (("r1", "accept"), ("r2", "accept"), ("r3", "reject")):
        assert rows[i]["review"] == decision and rows[i]["reviewed_by"] == MODEL, i
        assert rows[i]["review_reason"] == REPLIES[i]["reason"]
        assert rows[i]["auto_review"]["review"] == decision and rows[i]["auto_review"]["reviewed_by"] == MODEL
        assert rows[i]["auto_review"]["prompt_version"].startswith("golden-review/1-")
    # an unusable output: the item stays unreviewed, with a note, and the run went on
    assert "review" not in rows["r4"] and "reviewed_by" not in rows["r4"]
    assert rows["r4"]["review_note"].startswith(f"the automatic review by {MODEL} gave no usable decision")
    assert [i for i, _ in result.notes] == ["r4"] and any(line.startswith("warning: r4 left unreviewed") for line in log)
    assert rows["r5"] == ITEMS[4]  # the human's decision is left as it was
    assert SAME_REVIEWER.format(model=MODEL) not in log
    # the file is still a valid golden set, and the model's accepts count for --reviewed-only
    assert [it.id for it in keep_reviewed(load_golden(path))] == ["r1", "r2"]


def test_a_rerun_skips_reviewed_items_and_redo_reviews_only_the_models_own(tmp_path, tiny_index):
    path = _golden(tmp_path / "mine.jsonl")
    _auto(path, tiny_index.chunks)
    fixed = {"r4": {"reason": "the passage states it", "keep": True}}
    again, _ = _auto(path, tiny_index.chunks, lm=reviewer(fixed))  # only the unreviewed r4 is asked
    assert again.calls == 1 and again.decided == {"accept": 1} and again.reviewed_before == 4
    rows = _rows(path)
    assert rows["r4"]["review"] == "accept" and "review_note" not in rows["r4"]
    assert _auto(path, tiny_index.chunks, lm=reviewer({}))[0].calls == 0  # nothing left
    # --redo-auto: the model's decisions again, never the human's (r5 has no scripted reply: asking it would fail)
    flipped = {i: {"reason": "changed my mind", "keep": not (r["review"] == "accept")}
               for i, r in rows.items() if i != "r5"}
    redo, _ = _auto(path, tiny_index.chunks, lm=reviewer(flipped), redo=True, model="other-model")
    assert redo.calls == 4 and redo.decided == {"accept": 1, "reject": 3} and redo.reviewed_before == 1
    rows = _rows(path)
    assert {i: r["review"] for i, r in rows.items()} == {"r1": "reject", "r2": "reject", "r3": "accept",
                                                         "r4": "reject", "r5": "reject"}
    assert rows["r1"]["reviewed_by"] == "other-model" and rows["r5"]["reviewed_by"] == "human"


def test_review_passages_are_the_gold_and_seed_texts_and_an_item_without_any_is_left_with_a_note(tmp_path, tiny_index):
    chunks = {c.id: c for c in tiny_index.chunks}
    text = review_passages(ITEMS[0], chunks)
    assert text.startswith("[with#001] tests | with statement\nThe with statement is used")
    by_evidence = review_passages({"evidence": ["anonymous functions"], "relevant_chunk_ids": []}, chunks)
    assert by_evidence.startswith("[lambda#001]")
    lost = {**ITEMS[0], "id": "lost", "relevant_chunk_ids": ["gone#1"], "seed_chunk_id": "gone#1"}
    path = _golden(tmp_path / "lost.jsonl", [lost])
    result, _ = _auto(path, tiny_index.chunks, lm=reviewer({}))
    assert result.calls == 0 and result.notes and "none of its gold or seed passages is in the index" in result.notes[0][1]
    assert "review" not in _rows(path)["lost"]


def test_the_same_model_as_the_drafter_is_said_and_a_human_name_is_refused(tmp_path, tiny_index, capsys):
    path = _golden(tmp_path / "mine.jsonl")
    _, log = _auto(path, tiny_index.chunks, model="drafter-model", show_progress=True)
    assert SAME_REVIEWER.format(model="drafter-model") in log
    assert "reviewing" in capsys.readouterr().err  # the progress bar, on stderr
    with pytest.raises(InputError, match="needs a name other than 'human'"):
        _auto(_golden(tmp_path / "again.jsonl"), tiny_index.chunks, model="human")


def test_a_human_after_the_model_sees_its_proposal_and_the_agreement_is_reported(tmp_path, tiny_index):
    path = _golden(tmp_path / "mine.jsonl")
    _auto(path, tiny_index.chunks)
    shown = []
    queue = ["a", "r", "r", "s"]  # r1: agree (keep), r2: disagree (model kept), r3: agree (reject), r4: skip
    done = review_golden(path, ask=lambda _p: queue.pop(0), show=shown.append)
    assert done == {"accept": 1, "reject": 2, "skip": 1} and not queue
    assert any(f"Model ({MODEL}): accept, clear, and the passage states __enter__" in s for s in shown)
    rows = _rows(path)
    assert rows["r2"]["reviewed_by"] == "human" and "review_reason" not in rows["r2"]
    assert rows["r2"]["auto_review"]["review"] == "accept"  # the model's view is kept beside the human's
    summary = review_summary(rows.values())
    assert summary["reviewed"] == 4 and summary["kept"] == 1 and summary["notes"] == ["r4"]
    assert summary["decisions"] == {("accept", "human"): 1, ("reject", "human"): 3}
    assert summary["overlap_n"] == 3 and summary["agreement"] == pytest.approx(2 / 3)
    lines = "\n".join(review_lines(summary))
    assert "reviewed: 4 of 5 (human 4, model 0); not reviewed 1 (1 with a note: r4)" in lines
    assert "kept (accept or edit): 1 of 4 reviewed (0.25)" in lines
    assert "human and model agreement: 0.67 [" in lines and "(n=3, kappa 0.40): both kept 1, both rejected 1, " \
        "model kept and human rejected 1, model rejected and human kept 0" in lines
    # --reviewed-by human keeps the human's accepts only; a model-only set has none
    items = load_golden(path)
    assert [it.id for it in keep_reviewed(items, by="human")] == ["r1"]
    with pytest.raises(InputError, match="no item a human accepted or edited; review it by hand first"):
        keep_reviewed([it for it in items if it.id != "r1"], "x.jsonl", by="human")


def test_review_counts_by_decision_and_reviewer():
    records = [{"id": "a", "review": "accept", "reviewed_by": "m1"}, {"id": "b", "review": "reject", "reviewed_by": "m1"},
               {"id": "c", "review": "edit", "reviewed_by": "human"}, {"id": "d", "review": "accept"},  # by hand
               {"id": "e"}]
    summary = review_summary(records)
    assert summary["decisions"] == {("accept", "model"): 1, ("reject", "model"): 1, ("edit", "human"): 1,
                                    ("accept", "human"): 1}
    assert summary["models"] == {"m1": 2} and summary["kept"] == 3 and summary["overlap_n"] == 0
    assert review_lines(summary) == [
        "reviewed: 4 of 5 (human 2, model 2: m1 2); not reviewed 1",
        "  decision    human  model  total",
        "  accept          1      1      2",
        "  edit            1      0      1",
        "  reject          0      1      1",
        "kept (accept or edit): 3 of 4 reviewed (0.75)",
        "human and model agreement: no item yet (n=0; a human reviewing items after --auto gives it)",
    ]
    assert review_lines(review_summary([{"id": "x"}])) == ["reviewed: 0 of 1 (human 0, model 0); not reviewed 1"]


# ------------------------------------------------------------------ the command line
def _models(monkeypatch, lm, judge=MODEL):
    monkeypatch.setattr("rag.lm.configure.configure_dspy", lambda settings: None)  # keep DSPy's ChatAdapter
    lm.model = judge  # the reviewer is named as the trace names an LM: by its model
    monkeypatch.setattr("rag.lm.configure.lms_for_roles", lambda settings: {"answerer": lm, "judge": lm})


def test_cli_auto_review_then_check_then_eval_reviewed_by(tmp_path, tiny_index, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _models(monkeypatch, reviewer(), judge="drafter-model")
    path = _golden(tmp_path / "mine.jsonl")
    res = run_cli("golden", "review", path, "--auto", "--index-dir", tiny_index.dir, "--quiet")
    assert res.code == 0 and "Traceback" not in res.err, res.err
    assert "reviewing on the judge role's model: drafter-model" in res.err
    assert SAME_REVIEWER.format(model="drafter-model") in res.err and "warning: r4 left unreviewed" in res.err
    assert res.out.startswith("decisions: kept 2, rejected 1, left unreviewed with a note 1 (a rerun tries them "
                              "again); 1 reviewed before; 4 model calls\n")
    assert "reviewed: 4 of 5 (human 1, model 3: drafter-model 3); not reviewed 1 (1 with a note: r4)" in res.out
    assert _rows(path)["r1"]["reviewed_by"] == "drafter-model"
    checked = run_cli("golden", "check", path, "--index-dir", tiny_index.dir)
    assert checked.code == 0 and "kept (accept or edit): 2 of 4 reviewed (0.50)" in checked.out
    base = ("eval", "--retrieval-only", "--golden", path, "--index-dir", tiny_index.dir, "--json")
    assert json.loads(run_cli(*base, "--reviewed-only").out)["items"] == 2  # r1, r2: kept by the model
    check(run_cli(*base, "--reviewed-by", "human"), 1,
          r"^Error: .*mine\.jsonl has no item a human accepted or edited; review it by hand first")
    check(run_cli(*base, "--reviewed-by", "robot"), 1, r"^Error: --reviewed-by: unknown reviewer 'robot'; give human or model")
    rows = _rows(path)
    rows["r2"].update(review="edit", reviewed_by="human")
    _golden(path, list(rows.values()))
    assert json.loads(run_cli(*base, "--reviewed-by", "human").out)["items"] == 1  # r2 alone
    assert json.loads(run_cli(*base, "--reviewed-by", "model").out)["items"] == 1  # r1 alone


def test_cli_auto_review_needs_passages_and_set_needs_auto(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _golden(tmp_path / "hand.jsonl", [{k: v for k, v in ITEMS[0].items()}])  # no draft record: no index known
    check(run_cli("golden", "review", path, "--auto"), 1,
          r"^Error: the automatic review reads each item's passages from an index.*give --index-dir")
    check(run_cli("golden", "review", path, "--set", "judge_model=x"), 1,
          r"^Error: --set applies to the automatic review only; add --auto")
    assert "review" not in _rows(path)["r1"]


def test_agent_eval_reviewed_by_human_runs_the_human_confirmed_items_in_a_folder_of_their_own(tmp_path, tiny_index,
                                                                                              monkeypatch):
    from rag.cli.cmd_eval import run_agent_eval_cli
    from rag.eval.presets import plan_eval

    monkeypatch.chdir(tmp_path)
    script_agent(monkeypatch)
    path = _golden(tmp_path / "mine.jsonl", [{**ITEMS[0], "review": "accept", "reviewed_by": "human"},
                                             {**ITEMS[1], "review": "accept", "reviewed_by": MODEL}, *ITEMS[2:4]])
    sets = [f"index_dir={tiny_index.dir}", f"artifacts_dir={tmp_path / 'arts'}"]
    runs = {}
    for by in (None, "human"):
        assert run_agent_eval_cli("baseline", split="all", golden=path, set_pairs=sets, show_progress=False,
                                  reviewed_only=True, reviewed_by=by, judge=False) == 0
        plan = plan_eval("baseline", split="all", golden=path, set_pairs=sets, reviewed_only=True, reviewed_by=by,
                         judge=False)  # where that run went, and what it ran
        runs[by] = (plan.out_dir, [it.id for it in plan.items])
    assert runs[None][1] == ["r1", "r2"] and runs["human"][1] == ["r1"]
    assert runs[None][0] != runs["human"][0]  # never resumed into each other's run folder
    assert json.loads((runs["human"][0] / "summary.json").read_text())["ids"] == ["r1"]
    assert json.loads((runs[None][0] / "summary.json").read_text())["ids"] == ["r1", "r2"]
