"""Agent metrics on hand-built traces; every expected number is computed by hand in the comments."""

from __future__ import annotations

import pytest
from _traces import answer, grade, item, pred, retrieve, rewrite

from rag.eval.agent_metrics import percentile, score_item, summarize
from rag.stats.intervals import wilson

# A: answerable, gold {a1}. First retrieval misses, grader rightly rejects, rewrite finds a1, grader accepts.
A = (item("A", evidence=["needle one"]),
     pred([retrieve("x1", "x2"), grade(["x1", "x2"], False), rewrite(),
           retrieve("a1", "x1"), grade(["a1", "x1"], True, ["a1"]), answer(["a1"])], citations=["a1"]),
     {"a1"})
# B: answerable, gold {b1, b2}. First retrieval has b2 at rank 2; grader wrongly rejects twice; refuses.
B = (item("B", typ="vague"),
     pred([retrieve("y1", "b2"), grade(["y1", "b2"], False), rewrite(),
           retrieve("y2", "y3"), grade(["y2", "y3"], False), rewrite(),
           retrieve("y4", "b1"), grade(["y4", "b1"], False), {"node": "refuse", "latency_ms": 0.0}], refused=True),
     {"b1", "b2"})
# C: unanswerable (gold empty). Grader wrongly accepts z1 and the agent answers with one invalid citation.
C = (item("C", typ="unanswerable"),
     pred([retrieve("z1", "z2"), grade(["z1", "z2"], True, ["z1"], cached=True), answer(["z1"])],
          citations=["z1"], invalid=["bogus#1"]),
     set())

TEXTS = {"x1": "has needle one inside", "x2": "nothing", "a1": "needle one"}


def scored(judges=None):
    judges = judges or {"A": {"correct": True, "faithful": True}, "C": {"correct": False, "faithful": False}}
    return [score_item(it, p, g, k=2, max_rewrites=2, judge=judges.get(it.id), chunk_text=TEXTS)
            for it, p, g in (A, B, C)]


def test_percentile_matches_linear_interpolation():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([6, 9, 9], 95) == pytest.approx(9.0)
    assert percentile([1, 2, 3, 4, 5, 6], 95) == pytest.approx(5.75)  # pos 4.75 -> 5 + 0.75
    assert percentile([], 50) is None


def test_score_item_grader_confusions():
    a, b, c = scored()
    # A: step1 verdict F, shown has no gold -> TN; step2 verdict T, shown a1 -> TP
    assert a["grade_set"] == {"tp": 1, "fp": 0, "fn": 0, "tn": 1}
    # A chunks: x1,x2 not chosen not gold -> 2 TN; a1 chosen gold -> TP; x1 not chosen not gold -> TN
    assert a["grade_chunk"] == {"tp": 1, "fp": 0, "fn": 0, "tn": 3}
    # B: step1 shows b2 (gold) but F -> FN; step2 no gold F -> TN; step3 shows b1 F -> FN
    assert b["grade_set"] == {"tp": 0, "fp": 0, "fn": 2, "tn": 1}
    assert b["grade_chunk"] == {"tp": 0, "fp": 0, "fn": 2, "tn": 4}
    # C: unanswerable, verdict T -> FP; chunk z1 chosen not gold -> FP, z2 -> TN
    assert c["grade_set"] == {"tp": 0, "fp": 1, "fn": 0, "tn": 0}
    assert c["grade_chunk"] == {"tp": 0, "fp": 1, "fn": 0, "tn": 1}


def test_score_item_rewrites_retrieval_answers():
    a, b, c = scored()
    assert (a["rewrites"], a["rewrite_successes"], a["used_all_rewrites"]) == (1, 1, False)
    assert (b["rewrites"], b["rewrite_successes"], b["used_all_rewrites"]) == (2, 0, True)
    assert c["rewrite_successes"] == 0  # unanswerable, gold known (empty): no rewrite, and none could succeed
    # first retrieval: A misses a1 entirely; B has b2 at rank 2 of gold {b1,b2}
    assert (a["recall_at_k"], a["mrr_at_k"], a["hit_at_k"]) == (0.0, 0.0, 0.0)
    assert (b["recall_at_k"], b["mrr_at_k"], b["hit_at_k"]) == (0.5, 0.5, 1.0)
    assert c["recall_at_k"] is None
    assert a["needle_recall"] == 1.0  # "needle one" is in x1's text, which was retrieved first
    assert b["needle_recall"] is None  # B has no evidence strings
    assert (a["e2e_correct"], b["e2e_correct"], c["e2e_correct"]) == (True, False, None)
    assert (c["citations_valid"], c["citations_invalid"]) == (1, 1)
    # latency: A = 10+100+50+10+100+200 = 470; by node lists
    assert a["latency_ms"] == 470 and a["latency_by_node"]["grade"] == [100.0, 100.0]
    assert (c["lm_steps"], c["cached_steps"]) == (2, 1)


def test_summarize_pooled_definitions():
    s = summarize(scored())
    m = s["metrics"]
    # set level pooled: TP 1, FP 1, FN 2 -> P 1/2, R 1/3
    assert m["grader_set_precision"] == pytest.approx(1 / 2)
    assert m["grader_set_recall"] == pytest.approx(1 / 3)
    # chunk level pooled: TP 1, FP 1, FN 2
    assert m["grader_chunk_precision"] == pytest.approx(1 / 2)
    assert m["grader_chunk_recall"] == pytest.approx(1 / 3)
    assert m["correct_refusal_rate"] == 0.0  # C answered
    assert m["false_refusal_rate"] == pytest.approx(1 / 2)  # B refused of A, B
    assert m["rewrite_success_rate"] == pytest.approx(1 / 3)  # 1 of A's 1 + B's 2
    assert m["rewrites_per_answerable"] == pytest.approx(1.5)
    assert m["steps_mean"] == pytest.approx((6 + 9 + 3) / 3)
    assert m["steps_p95"] == pytest.approx(6 + 3 * 0.9)  # sorted 3,6,9; pos 1.9
    assert m["loop_rate"] == pytest.approx(1 / 3)  # B only
    assert m["recall_at_k"] == pytest.approx(0.25) and m["mrr_at_k"] == pytest.approx(0.25)
    assert m["needle_recall"] == 1.0
    assert m["answer_correctness"] == 1.0  # A judged correct; C is unanswerable (no correctness)
    assert m["faithfulness"] == pytest.approx(1 / 2)  # A yes, C no
    assert m["citation_validity"] == pytest.approx(2 / 3)  # A 1 valid, C 1 valid + 1 invalid
    assert m["e2e_accuracy"] == pytest.approx(1 / 2)  # A correct, B refused (wrong)
    assert m["cached_step_share"] == pytest.approx(1 / 11)  # LM steps: A 4, B 5, C 2; one cached
    assert s["by_type"]["vague"]["metrics"]["false_refusal_rate"] == 1.0
    assert s["by_type"]["unanswerable"]["metrics"]["false_refusal_rate"] is None


def test_cached_step_charged_original_latency():
    it, p, g = C
    p = {**p, "trace": {**p["trace"], "steps": [dict(s) for s in p["trace"]["steps"]]}}
    p["trace"]["steps"][1]["original_latency_ms"] = 900.0
    s = score_item(it, p, g, k=2, max_rewrites=2)
    assert s["latency_ms"] == 10 + 900 + 200


def test_reasons_when_not_computable():
    it = item("D")
    no_refl = pred([retrieve("d1"), answer(["d1"])], citations=["d1"])
    s = summarize([score_item(it, no_refl, {"d1"}, k=1, max_rewrites=2)])
    assert s["metrics"]["grader_set_precision"] is None
    assert s["why"]["grader_set_precision"] == "no grade steps: reflection off"
    assert s["why"]["loop_rate"] == "no grade steps: reflection off"
    assert s["why"]["correct_refusal_rate"] == "no unanswerable items"
    assert s["why"]["e2e_accuracy"] == "no answers were judged (judge off)"
    assert s["metrics"]["recall_at_k"] == 1.0


def test_errors_count_as_wrong_end_to_end():
    ok = score_item(item("E"), pred([retrieve("e1"), answer(["e1"])], citations=["e1"]), {"e1"}, k=1,
                    judge={"correct": True, "faithful": True})
    failed = score_item(item("F"), None, {"f1"}, k=1, error="ValueError: bad")
    s = summarize([ok, failed])
    assert s["metrics"]["e2e_accuracy"] == 0.5
    assert s["metrics"]["error_rate"] == 0.5
    assert s["counts"]["errors"] == 1


# G: answerable, gold {g1}. The grader REJECTS a context holding g1 while listing g1 (the agent stores the ids but
# answers from nothing), then says relevant WITHOUT ids after the rewrite (the agent answers from every passage).
G = (item("G"),
     pred([retrieve("g1", "x1"), grade(["g1", "x1"], False, ["g1"]), rewrite(),
           retrieve("g1", "x2"), grade(["g1", "x2"], True, []), answer(["g1", "x2"])], citations=["g1"]),
     {"g1"})
# U: unanswerable; two rewrites, none can succeed (no gold chunk exists); refused.
U = (item("U", typ="unanswerable"),
     pred([retrieve("u1"), grade(["u1"], False), rewrite(), retrieve("u2"), grade(["u2"], False), rewrite(),
           retrieve("u3"), grade(["u3"], False), {"node": "refuse", "latency_ms": 0.0}], refused=True),
     set())


def test_chunk_level_scores_what_the_agent_used():
    g = score_item(*G[:2], G[2], k=2, max_rewrites=2)
    # step 1: verdict F on a context with g1 -> set FN; used nothing -> g1 FN, x1 TN (g1 is NOT a positive)
    # step 2: verdict T -> set TP; no ids -> used g1 and x2 -> g1 TP, x2 FP
    assert g["grade_set"] == {"tp": 1, "fp": 0, "fn": 1, "tn": 0}
    assert g["grade_chunk"] == {"tp": 1, "fp": 1, "fn": 1, "tn": 1}
    # grader score per step = 0.6 x set agreement + 0.4 x chunk F1: step 1 = 0 + 0.4 x 0 = 0;
    # step 2 = 0.6 + 0.4 x 2/(2+1) = 0.8667
    assert g["grader_scores"] == [0.0, pytest.approx(0.6 + 0.4 * 2 / 3)]
    assert (g["rewrites"], g["rewrite_successes"]) == (1, 1)


def test_compile_and_eval_score_a_grade_step_with_one_function():
    """rag compile's grader metric on one step is what rag eval's grader score averages over steps."""
    import dspy

    from optimize.roles import grader_metric

    example = dspy.Example(shown_ids=["g1", "x2"], relevant_chunk_ids=["g1"])
    compiled = grader_metric(example, dspy.Prediction(relevant=True, relevant_chunk_ids=[], reason=""))
    evaluated = score_item(*G[:2], G[2], k=2, max_rewrites=2)["grader_scores"][1]
    assert compiled == evaluated == pytest.approx(0.6 + 0.4 * 2 / 3)
    rejected = grader_metric(dspy.Example(shown_ids=["g1", "x1"], relevant_chunk_ids=["g1"]),
                             dspy.Prediction(relevant=False, relevant_chunk_ids=["g1"], reason=""))
    assert rejected == score_item(*G[:2], G[2], k=2, max_rewrites=2)["grader_scores"][0] == 0.0
    s = summarize([score_item(*G[:2], G[2], k=2, max_rewrites=2)])
    assert s["metrics"]["grader_score"] == pytest.approx((0.0 + 0.6 + 0.4 * 2 / 3) / 2)


def test_rewrite_success_counts_every_rewrite_on_items_with_known_gold():
    s = summarize(scored() + [score_item(*U[:2], U[2], k=2, max_rewrites=2)])
    # successes: A 1 of 1, B 0 of 2, C none, U 0 of 2 -> 1 / 5 (leaving U out would give 1 / 3)
    assert s["metrics"]["rewrite_success_rate"] == pytest.approx(1 / 5)
    assert s["ci"]["rewrite_success_rate"]["n"] == 5 and s["ci"]["rewrite_success_rate"]["unit"] == "rewrites"


def test_refusal_rates_count_errored_items_and_error_rate_sits_beside_them():
    refused_u = score_item(*U[:2], U[2], k=2, max_rewrites=2)
    failed_u = score_item(item("V", typ="unanswerable"), None, set(), k=2, error="RuntimeError: x")
    refused_a = score_item(item("R"), pred([retrieve("r1"), grade(["r1"], False), {"node": "refuse"}], refused=True),
                           {"r1"}, k=2, max_rewrites=0)
    failed_a = score_item(item("S"), None, {"s1"}, k=2, error="RuntimeError: y")
    m = summarize([refused_u, failed_u, refused_a, failed_a])
    # the errored unanswerable item was not refused: 1 of 2 unanswerable refused (dropping it would say 1/1)
    assert m["metrics"]["correct_refusal_rate"] == 0.5 and m["metrics"]["false_refusal_rate"] == 0.5
    assert m["metrics"]["error_rate"] == 0.5 and m["counts"]["unanswerable"] == 2
    from rag.report.markdown import ROWS

    keys = [k for k, _, _ in ROWS]
    assert keys.index("error_rate") == keys.index("false_refusal_rate") + 1 == keys.index("correct_refusal_rate") + 2


def test_every_figure_carries_its_interval_and_n():
    s = summarize(scored())
    ci = s["ci"]
    # correct refusal: C answered, 0 of 1 -> Wilson(0, 1) = [0, 0.7935]
    assert ci["correct_refusal_rate"] == {"lo": pytest.approx(0.0, abs=1e-12), "hi": pytest.approx(wilson(0, 1)[1]),
                                          "n": 1, "unit": "items", "items": 3, "method": "wilson"}
    assert ci["e2e_accuracy"]["n"] == 2 and ci["e2e_accuracy"]["method"] == "wilson"
    # pooled over grade steps (n = TP + FP = 2): the wider of a bootstrap over items and Wilson(1, 2) = [9.5%, 90.5%]
    p = ci["grader_set_precision"]
    assert (p["n"], p["unit"], p["method"]) == (2, "grade steps", "wider of bootstrap over items and wilson")
    assert p["lo"] <= wilson(1, 2)[0] and p["hi"] >= wilson(1, 2)[1]
    # a mean of counts is never given a proportion's interval, even when every count is 0 or 1
    assert ci["rewrites_per_answerable"]["method"] == "bootstrap over items"
    one_cost = summarize([score_item(*A[:2], A[2], k=2)])["ci"]["cost_per_query"]
    # one item: every resample is A itself, cost 2 x 0.001 (grades) + 0.0005 (rewrite) + 0.002 (answer) = 0.0045
    assert (one_cost["lo"], one_cost["hi"], one_cost["method"]) == (pytest.approx(0.0045), pytest.approx(0.0045),
                                                                       "bootstrap over items")
    assert ci["latency_p50_ms"]["lo"] <= s["metrics"]["latency_p50_ms"] <= ci["latency_p50_ms"]["hi"]
    assert set(ci) == {k for k, v in s["metrics"].items() if v is not None}
    assert s["by_type"]["vague"]["ci"]["false_refusal_rate"]["n"] == 1


def test_a_gold_text_kept_under_another_id_scores_as_gold():
    # retrieval kept s1 and left out g1, its duplicate (same text), which is the gold id: the grader that chose s1
    # chose the gold text, and the first retrieval brought it at rank 1 (recall 1, MRR 1)
    steps = [{"node": "retrieve", "hits": [{"chunk_id": "s1", "rank": 1, "duplicates": ["g1"]}, {"chunk_id": "x", "rank": 2}]},
             grade(["s1", "x"], True, ["s1"]), answer(["s1"])]
    s = score_item(item("D"), pred(steps, citations=["s1"]), {"g1"}, k=2)
    assert s["recall_at_k"] == 1.0 and s["mrr_at_k"] == 1.0 and s["hit_at_k"] == 1.0
    assert s["grade_set"]["tp"] == 1 and s["grade_chunk"]["tp"] == 1 and s["grade_chunk"]["fp"] == 0


def test_a_grade_step_without_an_lm_call_is_timed_apart():
    # the subject shortcut rejects a context without calling the grader: its ~0 ms must not pull the grade call's p50 down
    skipped = {"node": "grade", "shown_ids": ["x"], "verdict": False, "chosen_ids": [], "latency_ms": 0.1, "model": None}
    steps = [retrieve("x"), grade(["x"], False, latency=900.0), rewrite(), retrieve("x"), skipped, {"node": "refuse", "latency_ms": 0.0}]
    s = score_item(item("E", typ="unanswerable"), pred(steps, refused=True), set(), k=1)
    assert s["latency_by_node"]["grade"] == [900.0] and s["latency_by_node"]["grade (no LM call)"] == [0.1]
    assert s["n_grade_steps"] == 2 and s["grade_set"]["tn"] == 2 and s["lm_steps"] == 2
