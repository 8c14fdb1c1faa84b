"""Retrieval metrics on hand-computed cases, and the report over a real small index."""

from __future__ import annotations

import math

import pytest

from rag.eval.golden import GoldenItem
from rag.eval.metrics import hit_at_k, mrr_at_k, needle_recall, recall_at_k, retrieval_report

RANKED = ["a", "b", "c", "d", "e"]


def test_recall_at_k_hand_computed():
    assert recall_at_k(RANKED, {"b", "e", "z"}, 2) == pytest.approx(1 / 3)  # only b in top 2
    assert recall_at_k(RANKED, {"b", "e", "z"}, 5) == pytest.approx(2 / 3)  # b and e; z never retrieved
    assert recall_at_k(RANKED, {"a"}, 1) == 1.0
    assert recall_at_k(RANKED, {"z"}, 5) == 0.0
    assert recall_at_k(["a", "a", "b"], {"a", "b"}, 2) == 1.0  # a duplicate counts once
    assert math.isnan(recall_at_k(RANKED, set(), 4))


def test_mrr_at_k_hand_computed():
    assert mrr_at_k(RANKED, {"c", "e"}, 5) == pytest.approx(1 / 3)
    assert mrr_at_k(RANKED, {"c"}, 2) == 0.0  # first gold at rank 3 is outside k=2
    assert mrr_at_k(RANKED, {"a"}, 4) == 1.0
    assert mrr_at_k(RANKED, {"d", "b"}, 4) == 0.5
    assert math.isnan(mrr_at_k(RANKED, [], 4))


def test_hit_at_k_hand_computed():
    assert hit_at_k(RANKED, {"d"}, 4) == 1.0
    assert hit_at_k(RANKED, {"d"}, 3) == 0.0
    assert math.isnan(hit_at_k(RANKED, set(), 3))


def test_needle_recall_hand_computed():
    texts = ["Tier 1 (Premium) cities", "employees in Good\n   Standing only", "automatically ineligible"]
    assert needle_recall(texts, ["Good Standing", "automatically ineligible"], 2) == 0.5  # whitespace collapsed
    assert needle_recall(texts, ["Good Standing", "automatically ineligible"], 3) == 1.0
    assert needle_recall(texts, ["good standing"], 3) == 0.0  # case-sensitive
    assert math.isnan(needle_recall(texts, [], 3))


def test_k_must_be_positive():
    with pytest.raises(ValueError):
        recall_at_k(RANKED, {"a"}, 0)
    with pytest.raises(ValueError):
        needle_recall(["x"], ["x"], 0)


def item(id_: str, question: str, ids=(), evidence=()) -> GoldenItem:
    return GoldenItem(id=id_, type="answerable", question=question, reference_answer="", should_refuse=False,
                      relevant_chunk_ids=list(ids), evidence=list(evidence), split=None, meta={})


def test_retrieval_report_on_a_real_index():
    from rag.retrieval.retriever import Retriever
    from tests.retrieval_support import small_index

    retriever = Retriever(small_index(), mode="bm25")
    items = [
        item("q1", "assert statement AssertionError debugging", ids=["assert#000"]),
        item("q2", "what does the pass statement do", evidence=["pass\" is a null operation"]),
        item("q3", "an unanswerable question about billing"),
    ]
    report = retrieval_report(items, retriever, k=4, mode="bm25")
    assert (report["items"], report["scored"], report["skipped_no_gold"]) == (3, 2, 1)
    assert report["skipped_ids"] == ["q3"]
    rows = {r["id"]: r for r in report["per_item"]}
    assert rows["q1"]["recall@4"] == recall_at_k(rows["q1"]["retrieved"], {"assert#000"}, 4) == 1.0
    assert rows["q2"]["gold"] == ["pass#000"]  # found through its evidence string
    expected = (rows["q1"]["mrr@4"] + rows["q2"]["mrr@4"]) / 2
    assert report["mrr@4"] == pytest.approx(expected, abs=1e-4)
    assert report["needle_recall@4"] == rows["q2"]["needle_recall@4"]
    # every figure with its 95% interval and n: hit@4 is a share of the 2 scored items (Wilson), MRR a bootstrap mean
    from rag.stats.intervals import wilson

    hits = int(round(report["hit@4"] * 2))
    assert report["ci"]["hit@4"] == {"lo": round(wilson(hits, 2)[0], 4), "hi": round(wilson(hits, 2)[1], 4), "n": 2,
                                     "method": "wilson"}
    mrr = report["ci"]["mrr@4"]
    assert mrr["n"] == 2 and min(rows["q1"]["mrr@4"], rows["q2"]["mrr@4"]) <= mrr["lo"] <= report["mrr@4"] <= mrr["hi"]


def test_with_duplicates_adds_the_ids_a_gold_hit_brings():
    from rag.eval.metrics import hit_ids, with_duplicates

    hits = [{"chunk_id": "a", "duplicates": ["a2"]}, {"chunk_id": "b"}, {"chunk_id": "c", "duplicates": ["c2", "c3"]}]
    assert hit_ids(hits[0]) == ["a", "a2"] and hit_ids(hits[1]) == ["b"]
    assert with_duplicates({"a2"}, hits) == {"a", "a2"}  # the kept copy of a gold text is gold
    assert with_duplicates({"c", "z"}, hits) == {"c", "c2", "c3", "z"}
    assert with_duplicates({"b"}, hits) == {"b"} and with_duplicates(set(), hits) == set()
