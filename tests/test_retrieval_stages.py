"""Query stages (multi-query expansion, HyDE), metadata filters and the version post-filter, on real small indexes
(bm25s + FAISS + the embedded MiniLM), with a scripted DummyLM where a stage calls a model."""

from __future__ import annotations

import json

import dspy
import pytest
from dspy.utils import DummyLM

from rag.agent.module import Sieve
from rag.errors import ConfigError, InputError
from rag.ingest.chunking import Chunk
from rag.ingest.metadata import document_metadata, iso_date
from rag.retrieval.expansion import Expansion, QueryExpander, clean_queries
from rag.retrieval.filters import parse_where
from rag.retrieval.retriever import Retriever
from tests.retrieval_support import SHARED

VAGUE = "how do I reassign a variable from the function around mine"


def test_an_expansion_brings_a_passage_the_question_alone_misses_and_says_which_list_found_it(tiny_retriever):
    plain = [h.chunk_id for h in tiny_retriever.search(VAGUE, k=2, mode="bm25")]
    assert "nonlocal#001" not in plain
    found = tiny_retriever.retrieve(VAGUE, k=2, mode="bm25",
                                    expansion=Expansion(queries=["nonlocal statement enclosing scope"]))
    top = {h.chunk_id: h for h in found.hits}["nonlocal#001"]  # tied with the question's own first hit, after it
    assert top.stages["expand"]["rank"] == 2 and top.stages["expand"]["found_by"] == ["bm25:q1"]
    assert top.stages["bm25"]["rank"] is None  # the question's own list did not have it


def test_hybrid_expansion_fuses_every_list_and_hyde_is_searched_by_embedding_only(tiny_retriever):
    expansion = Expansion(queries=["nonlocal statement"], passage="The nonlocal statement makes a name refer to the "
                          "variable bound in the nearest enclosing function scope.")
    hits = tiny_retriever.retrieve(VAGUE, k=3, mode="hybrid", expansion=expansion).hits
    top = {h.chunk_id: h for h in hits}["nonlocal#001"]
    assert top.rank <= 2 and top.stages["expand"]["rank"] == top.rank
    assert {"bm25:q1", "dense:q1", "dense:hyde"} <= set(top.stages["expand"]["found_by"])
    assert not any(name.startswith("bm25:hyde") for h in hits for name in h.stages["expand"]["found_by"])
    lexical = tiny_retriever.retrieve(VAGUE, k=3, mode="bm25", expansion=Expansion(passage="nonlocal"))
    assert any("bm25 mode has none" in n for n in lexical.notes)


def test_without_an_expansion_the_ranking_is_the_plain_one(tiny_retriever):
    q = "What does the with statement do?"
    assert [h.chunk_id for h in tiny_retriever.search(q)] == \
        [h.chunk_id for h in tiny_retriever.retrieve(q, expansion=Expansion()).hits]


def test_clean_queries_keeps_distinct_new_queries_up_to_n():
    raw = ["  What is X? ", "nonlocal  statement", "NONLOCAL statement", "", "nonlocal", "enclosing scope", "more"]
    assert clean_queries(raw, "what is x?", 2) == ["nonlocal statement", "enclosing scope"]
    assert clean_queries(["load image into local store", "load image into local", "load --load flag"], "q", 3) == [
        "load image into local store", "load --load flag"]
    assert clean_queries("one query", "q", 3) == ["one query"]
    assert clean_queries(None, "q", 3) == []


def test_the_expander_asks_the_model_and_an_unreadable_reply_costs_only_the_expansion():
    dspy.configure(lm=DummyLM([{"queries": ["nonlocal statement", "enclosing scope"]},
                               {"passage": "The nonlocal statement rebinds a variable of the enclosing function."}]))
    out = QueryExpander(n_queries=2, hyde=True)(VAGUE)
    assert out.queries == ["nonlocal statement", "enclosing scope"]
    assert out.passage.startswith("The nonlocal statement") and set(out.calls) == {"expand", "hyde"}
    dspy.configure(lm=DummyLM([{"wrong_field": "x"}] * 4))
    broken = QueryExpander(n_queries=2)(VAGUE)
    assert broken.queries == [] and any("could not be read" in n for n in broken.notes)
    assert not QueryExpander(n_queries=0).active


def test_the_agent_searches_the_rephrasings_and_counts_their_calls_in_the_retrieve_step(tiny_retriever):
    dspy.configure(lm=DummyLM([
        {"queries": ["nonlocal statement enclosing scope"]},
        {"reason": "nonlocal#001 says it", "subject": "nonlocal", "relevant": True, "relevant_chunk_ids": ["nonlocal#001"]},
        {"answer": "Use the nonlocal statement [nonlocal#001].", "cited_ids": ["nonlocal#001"]},
    ]))
    agent = Sieve(tiny_retriever, expander=QueryExpander(n_queries=1))
    pred = agent(question=VAGUE)
    step = pred.trace.of("retrieve")[0]
    assert step.expansions == ["nonlocal statement enclosing scope"]
    by_id = {h["chunk_id"]: h for h in step.hits}
    assert "bm25:q1" in by_id["nonlocal#001"]["stages"]["expand"]["found_by"]
    assert [s.node for s in pred.trace.steps] == ["retrieve", "grade", "answer"]
    assert "expander.expand" in dict(agent.named_predictors())
    assert pred.citations == ["nonlocal#001"]
    assert "also searched: 'nonlocal statement enclosing scope'" in pred.trace.render()


def test_an_inactive_expander_is_not_part_of_the_program(tiny_retriever):
    agent = Sieve(tiny_retriever, expander=QueryExpander(n_queries=0))
    assert agent.expander is None and not any(n.startswith("expander") for n, _ in agent.named_predictors())


def test_an_artifact_compiled_without_the_expander_still_applies_to_an_agent_with_one(tiny_retriever, tmp_path):
    from rag.agent import artifacts

    plain = Sieve(tiny_retriever)
    plain.grade.demos = [dspy.Example(question="q", context="c", reason="r", subject="s", relevant=True,
                                      relevant_chunk_ids=["with#001"])]
    plain.save(str(tmp_path / "program.json"))
    art = artifacts.Artifact(name="plain", path=tmp_path, manifest={})
    expanded = Sieve(tiny_retriever, expander=QueryExpander(n_queries=2))
    artifacts.apply(expanded, art)
    assert len(expanded.grade.demos) == 1 and expanded.expander is not None and expanded.expander.expand.demos == []


# ---------------------------------------------------------------- LM reranker
def test_the_lm_reranker_lifts_the_passage_it_lists_first_and_records_where_it_put_it(tiny_index):
    from rag.retrieval.rerank import LMReranker

    retriever = Retriever(tiny_index, top_k=3)  # not the shared fixture: this one gets a reranker

    q = "What does the with statement do?"
    plain = [h.chunk_id for h in retriever.search(q, k=3)]
    dspy.configure(lm=DummyLM([{"ranking": [3, 3, 99, "2"]}]))  # a repeat and a number it was not shown: dropped
    retriever.reranker = LMReranker(depth=3)
    found = retriever.retrieve(q, k=3)
    ids = [h.chunk_id for h in found.hits]
    assert ids[0] == plain[2] and set(ids) == set(plain)  # listed first, fused with its fused rank 3: now first
    assert found.hits[0].stages["rerank"]["lm_rank"] == 1 and found.hits[0].stages["rerank"]["rank"] == 1
    unlisted = {h.chunk_id: h for h in found.hits}[plain[0]]
    assert "lm_rank" not in unlisted.stages["rerank"]  # read, not listed: it keeps the first stage's share only
    assert found.reranking.order == [2, 1] and found.reranking.read == 3 and set(found.reranking.calls) == {"rerank"}


def test_an_unreadable_reranking_leaves_the_fused_order_and_says_so(tiny_index):
    from rag.retrieval.rerank import LMReranker, clean_order

    retriever = Retriever(tiny_index, top_k=3)

    q = "What does the with statement do?"
    plain = [h.chunk_id for h in retriever.search(q, k=3)]
    dspy.configure(lm=DummyLM([{"wrong_field": "x"}] * 4))
    retriever.reranker = LMReranker(depth=3)
    found = retriever.retrieve(q, k=3)
    assert [h.chunk_id for h in found.hits] == plain and any("rerank: skipped" in n for n in found.notes)
    assert clean_order(["2", "[1]", "x", 0, 7], 3) == [1, 0]


def test_the_reranker_reads_each_passage_cut_and_numbered():
    from rag.retrieval.rerank import LMReranker

    text = LMReranker(passage_chars=20).format([Chunk("a#0", "The with statement wraps a block in a context manager.", "with"),
                                                Chunk("b#0", "short", "")])
    assert text.startswith("[1] with\nThe with statement ...") and text.endswith("[2]\nshort")


def test_the_agent_holds_the_reranker_as_a_predictor_and_counts_its_call(tiny_index):
    from rag.retrieval.rerank import LMReranker

    retriever = Retriever(tiny_index, top_k=3)  # not the shared fixture: this one gets a reranker

    dspy.configure(lm=DummyLM([
        {"ranking": [1]},
        {"reason": "with#001 says it", "subject": "with", "relevant": True, "relevant_chunk_ids": ["with#001"]},
        {"answer": "It wraps a block [with#001].", "cited_ids": ["with#001"]},
    ]))
    retriever.reranker = LMReranker(depth=3)
    agent = Sieve(retriever, reranker=retriever.reranker)
    pred = agent(question="What does the with statement do?")
    assert "reranker.rank" in dict(agent.named_predictors())
    step = pred.trace.of("retrieve")[0]
    assert step.model == "dummy" and step.hits[0]["stages"]["rerank"]["lm_rank"] == 1  # its call is the step's


def test_reranker_lm_in_settings_builds_the_lm_reranker(tiny_index, tmp_path):
    from rag.config import Settings
    from rag.retrieval.rerank import LMReranker

    r = Retriever(tiny_index, reranker="lm", rerank_depth=5)
    assert isinstance(r.reranker, LMReranker) and r.reranker.depth == 5
    with pytest.raises(ConfigError, match="rerank_depth"):
        Settings(rerank_depth=0).validate()


# ---------------------------------------------------------------- metadata and filters
POLICIES = [
    ("travel/a#000", "Hotel rates", "The maximum hotel rate in a Tier 1 city is 300 USD per night.",
     {"category": "travel", "document": "TRV-1", "document_id": "TRV-1-V1", "version": "1", "effective_date": "2025-01-01"}),
    ("travel/b#000", "Hotel rates", "The maximum hotel rate in a Tier 1 city is 375 USD per night.",
     {"category": "travel", "document": "TRV-1", "document_id": "TRV-1-V2", "version": "2", "effective_date": "2026-01-01"}),
    ("hr/leave#000", "Leave", "Employees accrue paid time off each month; hotel stays are not covered.",
     {"category": "work policies/leave", "document": "HR-4", "version": "6"}),
    ("it/pw#000", "Passwords", "Passwords must be at least 14 characters long.", {"category": "security"}),
]


@pytest.fixture(scope="module")
def policy_index(tmp_path_factory):
    from rag.config import load_settings
    from rag.index.build import build_index

    root = tmp_path_factory.mktemp("policy-index")
    chunks = [Chunk(id=i, text=t, title=title, source=i.split("#")[0], meta=m) for i, title, t, m in POLICIES]
    return build_index(chunks, root, load_settings({"index_dir": root}), show_progress=False)


def test_where_searches_only_matching_chunks_and_a_folder_matches_its_sub_folders(policy_index):
    r = Retriever(policy_index, top_k=4)
    assert {h.chunk_id for h in r.search("hotel rate", where={"category": ["travel"]})} == {"travel/a#000", "travel/b#000"}
    hits = r.search("hotel", where={"category": ["Work Policies"]})
    assert [h.chunk_id for h in hits] == ["hr/leave#000"]
    both = r.retrieve("hotel", where=parse_where(["category=security,work policies"]))
    assert {h.chunk_id for h in both.hits} <= {"hr/leave#000", "it/pw#000"}
    assert "2 of 4 passages searched" in both.notes[0]


def test_a_filter_on_an_unknown_field_or_matching_nothing_says_what_the_index_has(policy_index):
    r = Retriever(policy_index)
    with pytest.raises(ConfigError, match=r"no field 'categry'; its fields: category, .*document_id"):
        r.search("hotel", where={"categry": ["travel"]})
    with pytest.raises(InputError, match=r"no passage matches; category values in this index: security, travel"):
        r.search("hotel", where={"category": ["finance"]})
    with pytest.raises(ConfigError, match="expected field=value"):
        parse_where(["category"])


def test_the_where_setting_filters_every_search_and_rag_eval_takes_where_and_a_config(policy_index, tmp_path):
    from rag.config import load_settings
    from tests.catalogue_support import run_cli

    s = load_settings({"index_dir": policy_index.dir, "where": "category=travel;version=2"})
    assert [h.chunk_id for h in Retriever.from_settings(s).search("hotel rate")] == ["travel/b#000"]
    with pytest.raises(ConfigError, match="expected field=value"):
        load_settings({"where": "category"})
    golden = tmp_path / "g.jsonl"
    golden.write_text(json.dumps({"id": "t1", "type": "answerable", "question": "What is the hotel rate in Tier 1?",
                                  "reference_answer": "375 USD", "should_refuse": False, "split": "dev",
                                  "relevant_chunk_ids": ["travel/b#000"]}) + "\n", encoding="utf-8")
    args = ["eval", "--retrieval-only", "--golden", golden, "--index-dir", policy_index.dir, "--k", "1", "--json"]
    filtered = run_cli(*args, "--where", "category=travel", "--where", "version=2")
    assert filtered.code == 0 and json.loads(filtered.out)["recall@1"] == 1.0
    wrong = run_cli(*args, "--where", "categry=travel")
    assert wrong.code == 1 and wrong.lines == ["Error: --where: this index has no field 'categry'; its fields: "
                                               + wrong.lines[0].split("its fields: ")[1]]
    assert "Traceback" not in wrong.err and "category" in wrong.lines[0]
    configured = run_cli(*args, "--config", "hybrid")  # a named configuration's retrieval settings, no agent
    assert configured.code == 0 and json.loads(configured.out)["mode"] == "hybrid"
    needs = run_cli(*args, "--config", "hybrid_rerank")
    assert needs.code == 1 and "--set reranker=lm" in needs.err


def test_the_category_router_searches_the_chosen_categories_and_falls_back_to_the_whole_index(policy_index):
    from rag.retrieval.categories import CategoryRouter, clean_choices, index_categories

    assert index_categories(policy_index) == ["security", "travel", "work policies/leave"]
    assert clean_choices([" Travel ", "finance", "travel", "security", "work policies/leave"],
                         index_categories(policy_index)) == ["travel", "security"]
    dspy.configure(lm=DummyLM([{"chosen": ["travel"]}, {"chosen": ["finance"]}, {"chosen": ["security"]}]))
    r = Retriever(policy_index, top_k=2, router=CategoryRouter())
    routed = r.retrieve("What is the hotel rate?")
    assert {h.chunk_id for h in routed.hits} == {"travel/a#000", "travel/b#000"} and routed.routing.chosen == ["travel"]
    assert any("route: category=travel: 2 of 4 passages searched" in n for n in routed.notes)
    unknown = r.retrieve("What is the hotel rate?", k=3)  # a category the index lacks: the whole index
    assert unknown.routing.chosen == [] and any("whole index is searched" in n for n in unknown.notes)
    assert len(unknown.hits) == 3
    too_few = r.retrieve("password length", k=2)  # security holds 1 passage, fewer than k
    assert any("holds 1 passages, fewer than 2" in n for n in too_few.notes) and len(too_few.hits) == 2
    explicit = r.retrieve("hotel", where={"category": ["work policies"]})  # --where wins: no router call
    assert explicit.routing is None and [h.chunk_id for h in explicit.hits] == ["hr/leave#000"]


def test_the_version_filter_keeps_the_newest_version_and_notes_what_it_dropped(policy_index):
    everything = Retriever(policy_index, top_k=4).search("maximum hotel rate Tier 1")
    assert {"travel/a#000", "travel/b#000"} <= {h.chunk_id for h in everything}
    latest = Retriever(policy_index, top_k=4, latest_only=True).retrieve("maximum hotel rate Tier 1")
    ids = [h.chunk_id for h in latest.hits]
    assert "travel/b#000" in ids and "travel/a#000" not in ids
    assert any("dropped travel/a#000 (TRV-1-V1), superseded" in n for n in latest.notes)


def test_metadata_rules_read_folders_front_matter_and_stated_headers():
    text = "# Policy\n**Document ID:** HR-POL-6002-V5\n**Effective Date:** April 1, 2026\n\nBody."
    assert document_metadata(text, "work policies/perf.md") == {
        "category": "work policies", "document_id": "HR-POL-6002-V5", "effective_date": "2026-04-01",
        "version": "5", "document": "HR-POL-6002"}
    front = document_metadata("---\ntitle: Setup Guide\nVersion: 2.1\n---\n# Setup\n", "guide.md")
    assert front == {"title": "Setup Guide", "version": "2.1"}
    assert document_metadata("# Notes\nNothing stated here. Version control is a topic.\n", "notes.md") == {}
    assert iso_date("June 1st, 2026") == "2026-06-01" and iso_date("soon") == "soon"


@pytest.mark.skipif(not (SHARED / "aegis" / "docs").is_dir(), reason="../shared/benchmarks/aegis is absent")
def test_every_aegis_policy_states_its_id_version_and_date():
    root = SHARED / "aegis" / "docs"
    metas = {p.name: document_metadata(p.read_text(encoding="utf-8"), p.relative_to(root).as_posix())
             for p in sorted(root.rglob("*.md"))}
    assert len(metas) == 8
    for name, meta in metas.items():
        assert {"category", "document_id", "version", "effective_date", "document"} <= set(meta), name
        assert meta["document_id"].endswith("-V" + meta["version"]), name
    assert metas["travel policy.md"]["category"] == "travel" and metas["travel policy.md"]["effective_date"] == "2026-01-01"


def test_folder_documents_carry_their_metadata_into_the_index(tmp_path):
    from rag.ingest.chunking import chunk_documents
    from rag.ingest.corpus import load_folder

    (tmp_path / "travel").mkdir()
    (tmp_path / "travel" / "t.md").write_text("# Travel\n**Document ID:** TRV-1-V2\n\nHotels cost money.\n", encoding="utf-8")
    (tmp_path / "top.md").write_text("# Top\n\nNothing stated.\n", encoding="utf-8")
    chunks = {c.meta["path"]: c.meta for c in chunk_documents(load_folder(tmp_path))}
    assert chunks["travel/t.md"]["category"] == "travel" and chunks["travel/t.md"]["version"] == "2"
    assert "category" not in chunks["top.md"]
    assert json.loads(json.dumps(chunks)) == chunks  # every field is plain JSON, as chunks.jsonl stores it


# ---------------------------------------------------------------- token budget
def test_a_token_budget_leaves_out_the_lowest_ranked_passages_and_the_trace_names_them(tiny_retriever):
    from rag.agent.context import format_context, within_budget

    hits = tiny_retriever.search("What does the with statement do?", k=3)
    count = len  # one "token" a character: the cut is easy to check
    one = len(format_context(hits[:1]))
    kept, cut = within_budget(hits, one + 10, count)
    assert [h.chunk_id for h in kept] == [hits[0].chunk_id] and [h.chunk_id for h in cut] == [h.chunk_id for h in hits[1:]]
    assert within_budget(hits, 1, count)[0] == hits[:1]  # the top passage always stays
    assert within_budget(hits, 10**6, count) == (list(hits), [])

    dspy.configure(lm=DummyLM([
        {"reason": "with#001 says it", "subject": "with statement", "relevant": True, "relevant_chunk_ids": [hits[0].chunk_id]},
        {"answer": f"It runs a block in a context [{hits[0].chunk_id}].", "cited_ids": [hits[0].chunk_id]},
    ]))
    pred = Sieve(tiny_retriever, top_k=3, context_tokens=5)(question="What does the with statement do?")
    grade, answer = pred.trace.of("grade")[0], pred.trace.of("answer")[0]
    assert grade.shown_ids == answer.shown_ids == [hits[0].chunk_id]
    assert any(n.startswith("token budget: left out 2 lowest-ranked") and "estimated" in n for n in grade.notes)


# ---------------------------------------------------------------- the CLI
def test_rag_search_filters_explains_and_names_the_fields_of_a_bad_filter(policy_index):
    from tests.catalogue_support import run_cli

    idx = str(policy_index.dir)
    out = run_cli("search", "maximum hotel rate", "--index-dir", idx, "--where", "category=travel",
                  "--set", "latest_only=true", "--explain")
    assert out.code == 0, out.err
    assert "[1] travel/b#000" in out.out and "] travel/a#000" not in out.out
    assert "note: filter category=travel: 2 of 4 passages searched" in out.out
    assert "note: version: dropped travel/a#000" in out.out
    bad = run_cli("search", "hotel", "--index-dir", idx, "--where", "categry=travel")
    assert bad.code == 1 and "Traceback" not in bad.err
    assert bad.lines[-1].startswith("Error: --where: this index has no field 'categry'; its fields: category")
