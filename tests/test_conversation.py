"""Follow-up questions (rag.agent.conversation): made standalone from bounded history, scripted with DummyLM over
the real tiny index; ``rag chat`` in a real process over the same kind of index with a scripted model."""

from __future__ import annotations

import dspy
import pytest
from dspy.utils import DummyLM

from rag.agent.conversation import Condenser, Turn, bounded, conversation_text
from rag.agent.module import Sieve
from rag.errors import InputError

HISTORY = [{"question": "What does the with statement do?",
            "answer": "It wraps a block with a context manager's __enter__ and __exit__ [with#001]."}]


def test_history_is_bounded_by_turns_then_characters():
    turns = [Turn(f"question {i}", "x" * 100) for i in range(6)]
    assert [t.question for t in bounded(turns, 3, 10_000)] == ["question 3", "question 4", "question 5"]
    short = bounded(turns, 3, 250)  # each turn is ~118 characters: two fit
    assert [t.question for t in short] == ["question 4", "question 5"]
    assert [t.question for t in bounded(turns, 3, 10)] == ["question 5"]  # the latest turn always stays
    assert bounded(turns, 0, 10_000) == []
    assert bounded([("q", "a"), {"question": "q2", "answer": "a2"}], 3, 100) == [Turn("q", "a"), Turn("q2", "a2")]
    assert conversation_text([Turn("q", "a\n b")]) == "Q: q\nA: a b"


def test_a_malformed_turn_is_a_clear_error():
    with pytest.raises(InputError, match=r'history: each turn is \{"question": str, "answer": str\}'):
        bounded([{"question": "only a question"}], 3, 100)


def test_a_follow_up_is_made_standalone_and_that_is_what_is_searched_graded_and_answered(tiny_retriever):
    lm = DummyLM([
        {"question": "What does the nonlocal statement do?"},
        {"reason": "nonlocal#001 says it", "relevant": True, "relevant_chunk_ids": ["nonlocal#001"]},
        {"answer": "It binds names of the enclosing scope [nonlocal#001].", "cited_ids": ["nonlocal#001"]},
    ])
    dspy.configure(lm=lm)
    agent = Sieve(tiny_retriever, condenser=Condenser(turns=3, chars=2000))
    pred = agent(question="and what about the nonlocal one?", history=HISTORY)
    assert [s.node for s in pred.trace.steps] == ["condense", "retrieve", "grade", "answer"]
    condense = pred.trace.of("condense")[0]
    assert condense.query == "and what about the nonlocal one?"
    assert condense.rewrite == "What does the nonlocal statement do?"
    assert pred.trace.of("retrieve")[0].query == "What does the nonlocal statement do?"
    assert pred.trace.of("retrieve")[0].hits[0]["chunk_id"] == "nonlocal#001"
    # the last question with the follow-up is searched too (no model needed), on the first search only
    assert pred.trace.of("retrieve")[0].expansions == ["What does the with statement do? and what about the nonlocal one?"]
    # the condenser read the earlier turn; the grader read the standalone question, not the follow-up
    from dspy.clients.base_lm import GLOBAL_HISTORY  # every call, whichever copy of the LM made it

    prompts = [str(call["messages"]) for call in GLOBAL_HISTORY[-3:]]
    assert "What does the with statement do?" in prompts[0]
    assert "What does the nonlocal statement do?" in prompts[1] and "and what about" not in prompts[1]
    assert "condense" in pred.trace.render()


def test_a_first_question_calls_no_condenser(tiny_retriever):
    dspy.configure(lm=DummyLM([
        {"reason": "with#001 says it", "relevant": True, "relevant_chunk_ids": ["with#001"]},
        {"answer": "It wraps a block [with#001].", "cited_ids": ["with#001"]},
    ]))
    pred = Sieve(tiny_retriever, condenser=Condenser())(question="What does the with statement do?", history=[])
    assert [s.node for s in pred.trace.steps] == ["retrieve", "grade", "answer"]


def test_an_unusable_condenser_output_searches_the_follow_up_as_asked(tiny_retriever):
    dspy.configure(lm=DummyLM([
        {"question": ""},
        {"reason": "with#001 says it", "relevant": True, "relevant_chunk_ids": ["with#001"]},
        {"answer": "It wraps a block [with#001].", "cited_ids": ["with#001"]},
    ]))
    pred = Sieve(tiny_retriever, condenser=Condenser())(question="what does the with statement do then?",
                                                       history=HISTORY)
    assert pred.trace.of("retrieve")[0].query == "what does the with statement do then?"


def test_rag_chat_answers_a_follow_up_from_its_standalone_form(tiny_index, tmp_path, monkeypatch):
    """rag chat in-process over the real tiny index, every role scripted in order: two questions piped in, the
    second a follow-up; answers on stdout as rag ask prints them, the standalone question on stderr; /clear
    forgets the conversation, so the question after it is not condensed."""
    from typer.testing import CliRunner

    from rag.cli import app
    from rag.lm.adapter import SieveAdapter

    lm = DummyLM([
        {"reason": "with#001 says it", "relevant": True, "relevant_chunk_ids": ["with#001"]},
        {"answer": "It wraps a block with a context manager [with#001].", "cited_ids": ["with#001"]},
        {"question": "What does the nonlocal statement do?"},
        {"reason": "nonlocal#001 says it", "relevant": True, "relevant_chunk_ids": ["nonlocal#001"]},
        {"answer": "It rebinds a name of the enclosing scope [nonlocal#001].", "cited_ids": ["nonlocal#001"]},
        {"reason": "lambda#001 says it", "relevant": True, "relevant_chunk_ids": ["lambda#001"]},
        {"answer": "An anonymous function [lambda#001].", "cited_ids": ["lambda#001"]},
    ], adapter=SieveAdapter())
    monkeypatch.setattr("rag.lm.configure.lms_for_roles",
                        lambda settings: {r: lm for r in ("grader", "rewriter", "answerer", "judge")})
    monkeypatch.chdir(tmp_path)  # no sieve.toml
    out = CliRunner().invoke(app, ["chat", "--index-dir", str(tiny_index.dir), "--no-artifact", "--no-cache"],
                             input="What does the with statement do?\n\nand the nonlocal one?\n/clear\n"
                                   "What is a lambda?\n/exit\nnever read\n")
    assert out.exit_code == 0, out.output
    stdout = out.stdout
    assert stdout.index("It wraps a block") < stdout.index("It rebinds a name") < stdout.index("An anonymous function")
    assert "[1] nonlocal statement (nonlocal#001)" in stdout
    assert "(searched as: What does the nonlocal statement do?)" in out.stderr
    assert "(conversation cleared)" in out.stderr
    # the question after /clear was not condensed (seven replies, all used), the one after /exit never ran
    assert "never read" not in out.output and "No more responses" not in out.output


def test_the_follow_up_golden_set_loads_and_each_item_has_a_conversation_and_gold_in_the_corpus():
    from rag.eval.golden import gold_chunk_ids, load_golden
    from rag.ingest.chunking import chunk_documents
    from rag.ingest.corpus import load_builtin_topics
    from rag.paths import golden_path

    items = load_golden(golden_path().with_name("python_ref_followups.jsonl"))
    assert len(items) >= 30 and all(i.history and i.type == "answerable" for i in items)
    chunks = chunk_documents(load_builtin_topics(), 1200, 150)
    assert all(gold_chunk_ids(i, chunks) for i in items)
    originals = {i.question for i in load_golden(golden_path())}
    assert all(i.meta["standalone"] in originals and i.question not in originals for i in items)


def test_a_bad_history_field_names_its_line_and_the_fix(tmp_path):
    from rag.eval.golden import load_golden

    path = tmp_path / "g.jsonl"
    path.write_text('{"id": "a", "type": "answerable", "question": "q?", "history": [{"question": "x"}]}\n')
    with pytest.raises(InputError, match=r'g\.jsonl:1: field .history. must be a list of \{"question"'):
        load_golden(path)


def test_rag_eval_runs_a_follow_up_with_its_conversation(tiny_retriever):
    from rag.eval.golden import GoldenItem
    from rag.eval.runner import run_item
    from rag.usage.latency import LatencyLedger

    dspy.configure(lm=DummyLM([
        {"question": "What does the nonlocal statement do?"},
        {"reason": "nonlocal#001 says it", "relevant": True, "relevant_chunk_ids": ["nonlocal#001"]},
        {"answer": "It rebinds a name of the enclosing scope [nonlocal#001].", "cited_ids": ["nonlocal#001"]},
    ]))
    item = GoldenItem("f1", "answerable", "and the nonlocal one?", "binds enclosing names", False,
                      ["nonlocal#001"], history=HISTORY)
    chunks = tiny_retriever.index.chunks
    record = run_item(item, Sieve(tiny_retriever, condenser=Condenser()), chunks=chunks,
                      texts={c.id: c.text for c in chunks}, judge=None, ledger=LatencyLedger(), k=4,
                      max_rewrites=2, config_name="full")
    steps = record["prediction"]["trace"]["steps"]
    assert steps[0]["node"] == "condense" and steps[1]["query"] == "What does the nonlocal statement do?"
    # retrieval is scored on the standalone question's search: the gold passage is first
    assert record["scores"]["mrr_at_k"] == 1.0 and record["scores"]["recall_at_k"] == 1.0, record["scores"]
