"""Failure diagnosis on hand-built traces: one case per kind, plus the non-failures."""

from __future__ import annotations

from _traces import answer, grade, item, pred, record, retrieve, rewrite

from rag.eval.diagnose import diagnose, is_failure

REFUSE = {"node": "refuse", "latency_ms": 0.0}
RIGHT = {"correct": True, "faithful": True, "reason": "same fact"}
WRONG = {"correct": False, "faithful": True, "reason": "says 3, reference says 5"}


def kind(rec):
    d = diagnose(rec)
    return d and d["kind"]


def test_correct_answer_and_correct_refusal_are_not_failures():
    ok = record(item("a"), pred([retrieve("g1"), grade(["g1"], True, ["g1"]), answer(["g1"])]), {"g1"}, judge=RIGHT)
    refused = record(item("u", "unanswerable"), pred([retrieve("z"), grade(["z"], False), REFUSE], refused=True), set())
    assert not is_failure(ok) and diagnose(ok) is None
    assert not is_failure(refused) and diagnose(refused) is None


def test_grader_false_negative():
    rec = record(item("a"), pred([retrieve("x", "g1"), grade(["x", "g1"], False), REFUSE], refused=True),
                 {"g1"}, max_rewrites=0)
    d = diagnose(rec)
    assert d["kind"] == "grader false negative" and "['g1']" in d["detail"] and "step 2" in d["detail"]


def test_retrieval_miss_vs_rewrite_loop():
    fresh = pred([retrieve("x1"), grade(["x1"], False), rewrite(), retrieve("x2"), grade(["x2"], False),
                  rewrite(), retrieve("x3"), grade(["x3"], False), REFUSE], refused=True)
    circling = pred([retrieve("x1", "x2"), grade(["x1", "x2"], False), rewrite(), retrieve("x2", "x1"),
                     grade(["x2", "x1"], False), rewrite(), retrieve("x1"), grade(["x1"], False), REFUSE], refused=True)
    assert kind(record(item("a"), fresh, {"g1"})) == "retrieval miss"
    assert kind(record(item("a"), circling, {"g1"})) == "rewrite loop"
    baseline = pred([retrieve("x1"), answer(["x1"])])
    assert kind(record(item("a"), baseline, {"g1"}, judge=WRONG)) == "retrieval miss"


def test_grader_false_positive_answerable_and_unanswerable():
    # gold g1 retrieved first (rejected? no: not shown); the grader accepts a later non-gold context
    ans = pred([retrieve("x1"), grade(["x1"], True, ["x1"]), answer(["x1"])])
    assert kind(record(item("a"), ans, {"g1"}, judge=WRONG)) == "retrieval miss"  # gold never retrieved
    ans2 = pred([retrieve("x1"), grade(["x1"], False), rewrite(), retrieve("g1", "x2"),
                 grade(["g1", "x2"], True, ["x2"]), answer(["x2"])])
    assert kind(record(item("a"), ans2, {"g1"}, judge=WRONG)) == "grader false positive"
    unans = pred([retrieve("z1"), grade(["z1"], True, ["z1"]), answer(["z1"])])
    d = diagnose(record(item("u", "unanswerable"), unans, set(), judge=WRONG))
    assert d["kind"] == "grader false positive" and "z1" in d["detail"]


def test_generation_error_and_no_refusal_path_and_agent_error():
    gen = pred([retrieve("g1"), grade(["g1"], True, ["g1"]), answer(["g1"])])
    d = diagnose(record(item("a"), gen, {"g1"}, judge=WRONG))
    assert d["kind"] == "generation error" and "says 3" in d["detail"]
    base = pred([retrieve("z1"), answer(["z1"])])
    assert kind(record(item("u", "unanswerable"), base, set())) == "no refusal path"
    crashed = record(item("a"), None, {"g1"}, error="AdapterParseError: no answer field")
    assert diagnose(crashed) == {"kind": "agent error", "detail": "AdapterParseError: no answer field"}


def test_a_gold_text_kept_under_another_id_is_gold_in_diagnosis_and_in_the_trace_view():
    # retrieval kept s1 and left out its duplicate g1 (the gold id): the context held the gold text and the grader
    # rightly accepted it, so a wrong answer is a generation error, not a retrieval miss
    from rag.report.trace_view import render_trace

    hits = retrieve("s1", "x")
    hits["hits"][0]["duplicates"] = ["g1"]
    rec = record(item("D"), pred([hits, grade(["s1", "x"], True, ["s1"]), answer(["s1"])], citations=["s1"]), {"g1"},
                 judge=WRONG)
    assert kind(rec) == "generation error"
    text = render_trace(rec)
    assert "* #1 s1  (same words as g1)" in text and "chosen=[*s1]" in text
