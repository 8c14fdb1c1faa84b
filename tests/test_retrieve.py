"""Retrieval modes, fusion, per-stage traces and bad queries on a real small index."""

from __future__ import annotations

import json
import re
import warnings

import pytest

from rag.errors import ConfigError, InputError
from rag.eval.metrics import hit_ids
from rag.retrieval.retriever import Hit, Retriever, rrf_fuse
from tests.retrieval_support import settings, small_index


@pytest.fixture(scope="module")
def retriever() -> Retriever:
    return Retriever(small_index(), mode="hybrid", top_k=4, candidates=20)


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_each_mode_finds_the_obvious_chunk(retriever: Retriever, mode: str):
    hits = retriever.search("What does the assert statement do when the condition is false?", mode=mode)
    assert len(hits) == 4 and [h.rank for h in hits] == [1, 2, 3, 4]
    assert hits[0].chunk_id.startswith("assert#")
    assert all(isinstance(h, Hit) and h.text and h.title and h.source.startswith("pydoc:") for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    for h in hits:
        assert set(h.stages) == {"bm25", "dense", "rrf", "expand", "rerank"}
        assert h.stages["expand"] == {"rank": None, "score": None}  # no query stage ran
        assert h.stages[mode if mode != "hybrid" else "rrf"]["rank"] == h.rank
        assert h.stages["rerank"] == {"rank": None, "score": None}


def test_hybrid_records_both_lists_and_fuses_by_rrf(retriever: Retriever):
    hits = retriever.search("lambda expressions create anonymous functions", k=5)
    for h in hits:
        expected = sum(retriever.weights[s] / (retriever.rrf_k + h.stages[s]["rank"])
                       for s in ("bm25", "dense") if h.stages[s]["rank"] is not None)
        assert h.stages["rrf"]["score"] == pytest.approx(expected, abs=1e-6)
        assert h.score == h.stages["rrf"]["score"]
    assert any(h.stages["bm25"]["rank"] and h.stages["dense"]["rank"] for h in hits)


def test_the_dense_list_weighs_dense_weight_in_the_fusion(retriever: Retriever):
    """The settings' fusion reaches the retriever: by default the dense list weighs 2 and rrf_k is 10 (as the
    constructor's defaults), so a chunk first in the dense list alone outscores one first in bm25 alone."""
    configured = Retriever.from_settings(settings())
    assert (configured.rrf_k, configured.weights) == (retriever.rrf_k, retriever.weights) == (10, {"bm25": 1.0, "dense": 2.0})
    fused = dict(rrf_fuse({"bm25": [1], "dense": [2]}, configured.rrf_k, configured.weights))
    assert fused[2] == pytest.approx(2 / 11) and fused[1] == pytest.approx(1 / 11)
    equal = Retriever.from_settings(settings(rrf_k=60, dense_weight=1.0))
    hits = equal.search("lambda expressions create anonymous functions", k=3)
    assert all(h.score == pytest.approx(sum(1 / (60 + h.stages[s]["rank"]) for s in ("bm25", "dense")
                                            if h.stages[s]["rank"] is not None), abs=1e-6) for h in hits)


def test_rrf_fuse_hand_computed():
    fused = rrf_fuse({"bm25": [1, 2, 3], "dense": [3, 1]}, k=60)
    scores = dict(fused)
    assert scores[1] == pytest.approx(1 / 61 + 1 / 62)
    assert scores[3] == pytest.approx(1 / 63 + 1 / 61)
    assert scores[2] == pytest.approx(1 / 62)
    assert [row for row, _ in fused] == [1, 3, 2]
    weighted = dict(rrf_fuse({"bm25": [1], "dense": [2]}, k=0, weights={"bm25": 2.0}))
    assert weighted == {1: 2.0, 2: 1.0}


def test_hit_to_dict_is_json(retriever: Retriever):
    hit = retriever.search("global statement")[0]
    data = json.loads(json.dumps(hit.to_dict()))
    assert data["chunk_id"] == hit.chunk_id and data["stages"]["rrf"]["rank"] == 1
    assert set(data) >= {"chunk_id", "text", "title", "source", "rank", "score", "stages"}


@pytest.mark.parametrize("query", ["", "   \n\t "])
def test_empty_query_is_an_input_error(retriever: Retriever, query: str):
    with pytest.raises(InputError, match="empty query"):
        retriever.search(query)


def test_huge_query_is_cut_with_a_warning(retriever: Retriever):
    query = "assert statement " + "lorem ipsum dolor sit amet " * 4000  # ~108 KB
    with pytest.warns(UserWarning, match=r"query is 1\d\d,\d{3} characters; only the first"):
        hits = retriever.search(query, k=3)
    assert len(hits) == 3


def test_unknown_mode_and_bad_k(retriever: Retriever):
    with pytest.raises(ConfigError, match="allowed: bm25, dense, hybrid"):
        retriever.search("x", mode="semantic")
    with pytest.raises(ConfigError, match="allowed: bm25, dense, hybrid"):
        Retriever(small_index(), mode="fuzzy")
    with pytest.raises(ConfigError, match="k must be"):
        retriever.search("x", k=0)


def test_k_larger_than_candidates_and_corpus(retriever: Retriever):
    n = len(small_index().chunks)
    hits = retriever.search("statement", k=n + 10, mode="dense")
    assert len(hits) == n and len({h.chunk_id for h in hits}) == n


def test_stopword_only_query_still_works(retriever: Retriever):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert retriever.search("the of and", mode="bm25") == []
        assert len(retriever.search("the of and", mode="hybrid")) == 4  # dense still answers


def test_from_settings_uses_the_configured_knobs():
    r = Retriever.from_settings(settings(mode="bm25", top_k=2, candidates=7))
    assert (r.mode, r.top_k, r.candidates) == ("bm25", 2, 7)
    assert len(r.search("while loop")) == 2


@pytest.mark.slow
def test_cross_encoder_rerank_stage():
    # No reranker ships offline; a CrossEncoder built on the bundled MiniLM weights (fresh score head) is
    # enough to exercise the real stage: every returned hit is re-scored and ordered by that score.
    from rag.index.embeddings import resolve_model_path

    r = Retriever(small_index(), reranker=resolve_model_path("default"), rerank_depth=6)
    hits = r.search("how do I leave a loop early", k=4)
    assert len(hits) == 4
    scores = [h.stages["rerank"]["score"] for h in hits]
    assert [h.stages["rerank"]["rank"] for h in hits] == [1, 2, 3, 4]
    assert scores == sorted(scores, reverse=True) and [h.score for h in hits] == scores
    assert all(h.stages["rrf"]["rank"] <= 6 for h in hits)


@pytest.fixture(scope="module")
def twin_index(tmp_path_factory):
    """The small index plus a copy of the first assert chunk under another id and title, underlined with "=" not "*"
    and indented, as the built-in corpus repeats a section under its chapter: a real index with a repeated passage."""
    from dataclasses import replace

    from rag.index.build import build_index
    from tests.retrieval_support import small_chunks

    chunks = list(small_chunks())
    first = next(c for c in chunks if c.id.startswith("assert#"))
    twin = replace(first, id="simple_stmts#assert", title="Simple statements > The assert statement",
                   text=first.text.replace("*", "=").replace("\n", "\n  "))
    root = tmp_path_factory.mktemp("twin") / "index"
    return build_index(chunks + [twin], root, settings(index_dir=root), show_progress=False), first.id


def test_a_repeated_passage_is_shown_once_and_the_next_distinct_one_takes_its_place(twin_index):
    index, first = twin_index
    question = "What does the assert statement do when the condition is false?"
    plain = Retriever(index, top_k=4, candidates=20, dedupe=False).search(question)
    assert {first, "simple_stmts#assert"} <= {h.chunk_id for h in plain}  # both copies make the top 4 without it
    hits = Retriever(index, top_k=4, candidates=20).search(question)
    assert len(hits) == 4 and [h.rank for h in hits] == [1, 2, 3, 4]
    texts = [" ".join(re.findall(r"\w+", h.text.lower())) for h in hits]
    assert len(set(texts)) == 4
    kept = next(h for h in hits if h.chunk_id in (first, "simple_stmts#assert"))
    assert sorted(hit_ids(kept)) == sorted([first, "simple_stmts#assert"]) and len(kept.duplicates) == 1
    assert not any(h.duplicates for h in hits if h is not kept)
    # the place the copy took is the next distinct chunk of the same ranking
    distinct = [h.chunk_id for h in Retriever(index, top_k=8, candidates=20, dedupe=False).search(question)
                if h.chunk_id not in kept.duplicates]
    assert [h.chunk_id for h in hits] == distinct[:4]
    assert json.loads(json.dumps(kept.to_dict()))["duplicates"] == kept.duplicates


def test_leaving_out_a_repeat_never_lowers_recall(twin_index):
    from rag.eval.golden import GoldenItem
    from rag.eval.metrics import retrieval_report

    index, first = twin_index
    evidence = " ".join(next(c for c in index.chunks if c.id == first).text.split()[:8])
    item = GoldenItem(id="t", type="answerable", question="What does the assert statement do when the condition is false?",
                      reference_answer="r", should_refuse=False, relevant_chunk_ids=[], evidence=[evidence], split="test", meta={})
    on = retrieval_report([item], Retriever(index, top_k=4, candidates=20), k=4)
    off = retrieval_report([item], Retriever(index, top_k=4, candidates=20, dedupe=False), k=4)
    assert set(on["per_item"][0]["gold"]) == {first, "simple_stmts#assert"}
    assert off["recall@4"] == on["recall@4"] == 1.0 and off["hit@4"] == on["hit@4"] == 1.0
    assert on["mrr@4"] == off["mrr@4"] > 0
    # an explicit gold id that retrieval left out as a repeat counts through the hit that brings its text
    item2 = GoldenItem(id="t2", type="answerable", question=item.question, reference_answer="r", should_refuse=False,
                       relevant_chunk_ids=["simple_stmts#assert"], evidence=[], split="test", meta={})
    report = retrieval_report([item2], Retriever(index, top_k=4, candidates=20), k=4)
    assert report["recall@4"] == 1.0 and report["hit@4"] == 1.0
