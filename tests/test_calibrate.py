"""Judge calibration: Cohen's kappa on hand cases, label storage, agreement and the interactive loop."""

from __future__ import annotations

import json

import pytest

from rag.errors import InputError
from rag.eval.calibrate import agreement, cohen_kappa, label_interactively, load_labels, save_labels


def test_kappa_hand_cases():
    # p_o = 3/4; p_a(yes) = 1/2, p_b(yes) = 1/4; p_e = 1/8 + 3/8 = 1/2; kappa = (3/4 - 1/2) / (1/2) = 1/2
    assert cohen_kappa([True, True, False, False], [True, False, False, False]) == pytest.approx(0.5)
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> p_o .7, p_e .5*.6 + .5*.4 = .5 -> kappa .4
    a = [True] * 25 + [False] * 25
    b = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa([True, False], [True, False]) == pytest.approx(1.0)
    assert cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)
    assert cohen_kappa([True, True], [True, True]) is None  # p_e = 1: undefined
    with pytest.raises(ValueError):
        cohen_kappa([True], [True, False])


def rec(iid, answer, correct, faithful=True, refused=False):
    return {"id": iid, "question": f"q{iid}", "reference_answer": "r", "status": "ok", "config": "full",
            "prediction": {"answer": answer, "refused": refused},
            "judge": {"correct": correct, "faithful": faithful, "reason": ""}}


RECORDS = [rec("1", "a one", True), rec("2", "a two", True, False), rec("3", "a three", False),
           rec("4", "a four", False), rec("5", "sorry", False, refused=True)]


def test_agreement_matches_labels_by_id_and_answer(tmp_path):
    labels = [{"id": "1", "answer": "a one", "correct": True, "faithful": True},
              {"id": "2", "answer": "a  two", "correct": False, "faithful": False},  # whitespace differs: same answer
              {"id": "3", "answer": "a three", "correct": False, "faithful": True},
              {"id": "4", "answer": "an older answer", "correct": True, "faithful": True}]  # stale: not matched
    out = agreement(RECORDS, labels)
    assert out["n"] == 3
    # correct: judge T,T,F vs human T,F,F -> accuracy 2/3; p_o 2/3, p_e (2/3*1/3)+(1/3*2/3) = 4/9 -> kappa 0.4
    assert out["correct"]["accuracy"] == pytest.approx(2 / 3)
    assert out["correct"]["kappa"] == pytest.approx((2 / 3 - 4 / 9) / (5 / 9))
    assert out["faithful"]["accuracy"] == 1.0


def test_labels_file_round_trip_and_errors(tmp_path):
    path = tmp_path / "labels.jsonl"
    save_labels(path, [{"id": "1", "answer": "x", "correct": True, "faithful": False},
                       {"id": "1", "answer": "x", "correct": False, "faithful": False}])  # later wins
    assert load_labels(path) == [{"id": "1", "answer": "x", "correct": False, "faithful": False}]
    path.write_text('{"id": "1", "answer": "x", "correct": "yes", "faithful": true}\n')
    with pytest.raises(InputError, match=r"labels.jsonl:1: field 'correct' must be true or false"):
        load_labels(path)


def test_interactive_labelling_skips_quits_and_saves(tmp_path):
    store = tmp_path / "golden" / "judge_labels.jsonl"
    replies = iter(["y", "n", "looks fine",  # item 1: correct yes, faithful no, note
                    "s",                     # item 2: skipped
                    "maybe", "n", "y", "",    # item 3: invalid reply re-asked, then no / yes
                    "q"])                    # item 4: quit
    shown = []
    labels: list = []
    added = label_interactively(RECORDS, labels, store, ask=lambda p: next(replies), show=shown.append)
    assert added == 2
    saved = load_labels(store)
    assert [(s["id"], s["correct"], s["faithful"], s["note"]) for s in saved] == \
        [("1", True, False, "looks fine"), ("3", False, True, "")]
    assert len(shown) == 4 and "Answer: a one" in shown[0]  # the refused item 5 is never shown
    # a second session starts where the first stopped (labelled items are not asked again)
    more = iter(["y", "y", "", "y", "y", "", "q"])
    label_interactively(RECORDS, labels, store, ask=lambda p: next(more), show=shown.append)
    assert {s["id"] for s in load_labels(store)} == {"1", "2", "3", "4"}
    assert json.loads(store.read_text().splitlines()[0])["run"] == "full"


def test_human_accuracy_counts_refusals_and_errors_as_wrong_and_leaves_out_unlabelled_answers():
    from rag.eval.calibrate import human_accuracy

    def rec(iid, config="full", refused=False, answer="ans", status="ok", should_refuse=False):
        return {"id": iid, "config": config, "status": status, "should_refuse": should_refuse,
                "prediction": {"refused": refused, "answer": answer}}

    records = [rec("a1"), rec("a2"), rec("a3", refused=True), rec("a4", status="error"),
               rec("a5", answer="no label for this one"), rec("u1", refused=True, should_refuse=True),
               rec("a1", config="baseline", answer="other text")]
    labels = [{"id": "a1", "answer": "ans", "correct": True, "faithful": True},
              {"id": "a2", "answer": " ans ", "correct": False, "faithful": True},
              {"id": "a1", "answer": "other text", "correct": True, "faithful": False}]
    out = human_accuracy(records, labels)
    full = out["full"]
    assert (full["correct"], full["n"], full["unlabelled"]) == (1, 4, 1)  # a1 right; a2 wrong; a3, a4 count wrong
    assert full["accuracy"] == 0.25 and full["interval"][0] < 0.25 < full["interval"][1]
    assert out["baseline"] == {**out["baseline"], "correct": 1, "n": 1, "unlabelled": 0}  # labels match by answer text


def test_human_paired_compares_configs_on_their_common_labelled_items():
    from rag.eval.calibrate import human_paired

    def rec(iid, config, answer):
        return {"id": iid, "config": config, "status": "ok", "should_refuse": False,
                "prediction": {"refused": answer is None, "answer": answer or ""}}

    records = [rec("a1", "full", "x"), rec("a2", "full", None), rec("a3", "full", "x"), rec("a4", "full", "x"),
               rec("a1", "baseline", "y"), rec("a2", "baseline", "y"), rec("a3", "baseline", "unlabelled")]
    labels = [{"id": i, "answer": "x", "correct": True, "faithful": True} for i in ("a1", "a3", "a4")]
    labels += [{"id": i, "answer": "y", "correct": i == "a2", "faithful": True} for i in ("a1", "a2")]
    (pair,) = human_paired(records, labels)
    # common labelled items: a1 (full right, baseline wrong) and a2 (full refused: wrong; baseline right)
    assert (pair["a"], pair["b"], pair["n"]) == ("baseline", "full", 2)
    assert (pair["a_right"], pair["b_right"], pair["only_a"], pair["only_b"]) == (1, 1, 1, 1) and pair["p"] == 1.0


def test_grounded_outcomes_count_a_right_answer_its_citations_do_not_support_as_wrong():
    from rag.eval.calibrate import human_accuracy, human_paired

    def rec(iid, config, answer):
        return {"id": iid, "config": config, "status": "ok", "should_refuse": False,
                "prediction": {"refused": False, "answer": answer}}

    records = [rec("a1", "full", "x"), rec("a2", "full", "x"), rec("a1", "baseline", "y"), rec("a2", "baseline", "y")]
    labels = [{"id": "a1", "answer": "x", "correct": True, "faithful": True},
              {"id": "a2", "answer": "x", "correct": False, "faithful": False},
              {"id": "a1", "answer": "y", "correct": True, "faithful": False},  # right from the model's own knowledge
              {"id": "a2", "answer": "y", "correct": True, "faithful": True}]
    assert human_accuracy(records, labels)["baseline"]["correct"] == 2
    assert human_accuracy(records, labels, grounded=True)["baseline"]["correct"] == 1
    (pair,) = human_paired(records, labels, grounded=True)
    assert (pair["a_right"], pair["b_right"], pair["only_a"], pair["only_b"]) == (1, 1, 1, 1)


def test_a_label_with_citations_applies_only_to_an_answer_citing_those_passages(tmp_path):
    from rag.eval.calibrate import human_accuracy

    def rec(iid, config, cited):
        return {"id": iid, "config": config, "status": "ok", "should_refuse": False,
                "prediction": {"refused": False, "answer": "same text", "citations": cited}}

    # two runs write the same answer; only one cites the passage that states it
    records = [rec("a1", "accepted", ["gold#000"]), rec("a1", "graded", ["other#001"]), rec("a1", "third", ["x#002"])]
    labels = [{"id": "a1", "answer": "same text", "correct": True, "faithful": True, "citations": ["gold#000"]},
              {"id": "a1", "answer": "same text", "correct": True, "faithful": False, "citations": ["other#001"]}]
    grounded = human_accuracy(records, labels, grounded=True)
    assert grounded["accepted"]["correct"] == 1 and grounded["graded"]["correct"] == 0
    assert grounded["third"] == {**grounded["third"], "n": 0, "unlabelled": 1}  # cites other passages: a new label
    # a label without citations still applies to any citations, but one that names them wins
    labels.append({"id": "a1", "answer": "same text", "correct": False, "faithful": False})
    assert human_accuracy(records, labels)["third"]["correct"] == 0
    assert human_accuracy(records, labels)["accepted"]["correct"] == 1
    # storing keeps one label per answer and citations
    save_labels(tmp_path / "l.jsonl", labels + [dict(labels[0], note="relabelled")])
    stored = load_labels(tmp_path / "l.jsonl")
    assert len(stored) == 3 and stored[0]["note"] == "relabelled"


def test_the_critic_is_scored_against_the_faithful_labels_by_its_last_verdict():
    from rag.eval.calibrate import critic_agreement

    def rec(iid, answer, *verdicts, should_refuse=False):
        steps = [{"node": "answer"}, *({"node": "critique", "verdict": v} for v in verdicts)]
        return {"id": iid, "config": "full", "status": "ok", "should_refuse": should_refuse,
                "prediction": {"refused": False, "answer": answer, "trace": {"steps": steps}}}

    records = [rec("a1", "x", True),            # grounded, and faithful: agree
               rec("a2", "x", False, False),    # flagged after its retry, and unfaithful: agree
               rec("a3", "x", False, True),     # grounded after the retry, but unfaithful: a miss
               rec("a4", "x", None),            # the critic's output was unusable: left out
               rec("a5", "x"),                  # never critiqued (an index without tables): left out
               rec("a6", "unlabelled", True),
               rec("u1", "x", False, False, should_refuse=True)]  # an answer to an unanswerable item, caught
    labels = [{"id": i, "answer": "x", "correct": i == "a1", "faithful": i == "a1"}
              for i in ("a1", "a2", "a3", "a4", "a5", "u1")]
    out = critic_agreement(records, labels)
    assert (out["n"], out["critic_yes"], out["human_yes"]) == (4, 2, 1)
    assert out["accuracy"] == 0.75 and (out["flagged_unfaithful"], out["missed_unfaithful"]) == (2, 1)
    assert out["kappa"] == pytest.approx(cohen_kappa([True, False, True, False], [True, False, False, False]))
    none = critic_agreement(records[3:5], labels)
    assert none["n"] == 0 and none["accuracy"] is None and none["kappa"] is None


def test_rag_calibrate_reports_the_critic_on_the_committed_ops_run():
    """The figures docs/results.md quotes for the grounding critic, from the committed run and hand labels."""
    from pathlib import Path

    from typer.testing import CliRunner

    from rag.cli import app

    root = Path(__file__).resolve().parents[1]
    out = CliRunner().invoke(app, ["calibrate", "--run", str(root / "benchmarks/results/eval-ops-qwen1.5b-xeon"),
                                   "--store", str(root / "golden/ops_demo_labels.jsonl"), "--no-label"])
    assert out.exit_code == 0, out.output
    assert "judge: no answer in these runs was judged (rag eval --no-judge)" in out.stdout
    assert ("grounding critic vs faithful, on 45 labelled answers it checked: accuracy 35.6%  Cohen's kappa -0.124  "
            "(critic grounded 39, human faithful 18; unfaithful flagged 2, missed 25)") in out.stdout
    assert "full: right by human labels 34.2% [21.2%, 50.1%], 13 of n=38 items" in out.stdout
