"""Reference overlap (rag.eval.overlap): token F1 by hand, and its place in the harness's scores and in calibration."""

from __future__ import annotations

import pytest
from _traces import answer, grade, item, pred, retrieve

from rag.eval.agent_metrics import score_item, summarize
from rag.eval.calibrate import overlap_agreement
from rag.eval.overlap import F1_CORRECT, right_by_overlap, token_f1, words


def test_words_split_code_names_and_ignore_case():
    assert words("Assign m.__dict__ = New") == ["assign", "m", "__dict__", "new"]
    assert words("") == [] and words(None) == []


def test_token_f1_by_hand():
    # answer 4 words, reference 3, common 2 ("nonlocal", "binds"): P = 2/4, R = 2/3, F1 = 2PR/(P+R) = 4/7
    assert token_f1("nonlocal binds outer names", "nonlocal binds enclosing") == pytest.approx(4 / 7)
    assert token_f1("a a b", "a b b") == pytest.approx(2 / 3)  # multiset: common {a:1, b:1} = 2 of 3 each side
    assert token_f1("same words", "Same, words!") == pytest.approx(1.0)
    assert token_f1("unrelated", "nothing shared") == 0.0 and token_f1("", "ref") == 0.0
    assert right_by_overlap("nonlocal binds outer names", "nonlocal binds enclosing")
    assert not right_by_overlap("unrelated", "nothing shared")
    assert right_by_overlap("x y", "x z", threshold=0.6) is False  # F1 0.5


def _answered(iid, text, typ="answerable"):
    it = item(iid, typ)
    prediction = pred([retrieve("a1"), grade(["a1"], True, ["a1"]), answer(["a1"])], citations=["a1"])
    prediction["answer"] = text
    return it, prediction


def test_scores_carry_overlap_without_a_judge():
    right = _answered("A", "ref")  # item() gives every item the reference answer "ref": F1 1.0
    wrong = _answered("B", "something else entirely")  # F1 0
    refused = (item("C"), pred([retrieve("x"), grade(["x"], False)], refused=True))
    unanswerable = _answered("D", "ref", typ="unanswerable")
    scores = [score_item(it, p, set(), k=4, max_rewrites=2) for it, p in (right, wrong, refused, unanswerable)]
    assert [s["reference_f1"] for s in scores] == [1.0, 0.0, None, None]
    assert [s["overlap_correct"] for s in scores] == [True, False, None, None]
    metrics = summarize(scores)["metrics"]
    assert metrics["answer_correctness"] is None  # no judge ran
    assert metrics["overlap_correctness"] == pytest.approx(1 / 2)  # of the two answered answerable items
    assert metrics["e2e_overlap_accuracy"] == pytest.approx(1 / 3)  # of three answerable; the refusal counts as wrong
    assert metrics["reference_f1"] == pytest.approx(0.5)


def test_overlap_agreement_counts_labelled_answers_judged_or_not():
    def rec(iid, text, should_refuse=False, refused=False):
        return {"id": iid, "status": "ok", "should_refuse": should_refuse, "reference_answer": "the with statement",
                "prediction": {"answer": text, "refused": refused}}  # no "judge": a --no-judge run

    records = [rec("1", "the with statement wraps a block"), rec("2", "unrelated words"),
               rec("3", "the with statement"), rec("4", "x", should_refuse=True), rec("5", "", refused=True)]
    labels = [{"id": "1", "answer": "the with statement wraps a block", "correct": True, "faithful": True},
              {"id": "2", "answer": "unrelated words", "correct": False, "faithful": True},
              {"id": "3", "answer": "the with statement", "correct": False, "faithful": True},
              {"id": "4", "answer": "x", "correct": False, "faithful": False}]
    out = overlap_agreement(records, labels)
    # items 1-3 count (4 should be refused, 5 was refused); rule says yes, no, yes; humans yes, no, no
    assert out["n"] == 3 and out["threshold"] == F1_CORRECT
    assert out["accuracy"] == pytest.approx(2 / 3)
    assert (out["overlap_yes"], out["human_yes"]) == (2, 1)
    # p_o = 2/3; p_rule(yes) = 2/3, p_human(yes) = 1/3; p_e = 2/9 + 2/9 = 4/9; kappa = (2/3 - 4/9) / (5/9) = 0.4
    assert out["kappa"] == pytest.approx(0.4)
