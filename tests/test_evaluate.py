"""run_eval end to end: the real Sieve agent over a real tiny index (bm25s + FAISS + MiniLM), scripted LMs.

The LM is a dspy.utils.DummyLM whose reply is chosen per role (from the signature's instructions) and per
question, so the control flow (grade, rewrite, refuse, answer, judge) is fixed while retrieval is real.
"""

from __future__ import annotations

import json
import re
import threading

import dspy
import pytest
from dspy.clients.engines.dummy_engine import AsyncDummyEngine, DummyEngine
from dspy.lm15 import Message, Response, TextPart, Usage
from dspy.utils import DummyLM

from rag.agent.module import Sieve
from rag.config import Settings
from rag.errors import ModelError
from rag.eval.golden import GoldenItem
from rag.eval.runner import run_eval
from rag.eval.runs import read_records
from rag.index.build import build_index
from rag.ingest.chunking import Chunk
from rag.retrieval.retriever import Retriever

DOCS = {
    "festival.md#000": ("Zorbel festival", "The zorbel festival is held every April in the town of Quenton."),
    "bridges.md#000": ("Velmora", "Velmora is famous for its glass bridges, built in 1911 by the engineer Arla Tesk."),
    "bread.md#000": ("Baking", "Quenton sourdough is proofed for eighteen hours before baking."),
    "rivers.md#000": ("Rivers", "The Lenn river flows north and freezes each winter."),
    "trains.md#000": ("Trains", "The coastal train leaves Quenton at seven and reaches Velmora by noon."),
    "music.md#000": ("Music", "The Quenton choir sings old harvest songs at the zorbel festival."),
    "tax.md#000": ("Taxes", "Market stalls in Quenton pay a flat fee of twelve coins per day."),
    "birds.md#000": ("Birds", "Grey herons nest along the Lenn river in early spring."),
}


def item(iid, question, typ="answerable", evidence=(), reference="ref"):
    return GoldenItem(id=iid, type=typ, question=question, reference_answer=reference,
                      should_refuse=typ == "unanswerable", relevant_chunk_ids=[], evidence=list(evidence),
                      split="test", meta={})


ITEMS = [
    item("q1", "When is the zorbel festival held?", evidence=["held every April"], reference="Every April."),
    item("q2", "Who made those see-through crossings?", typ="vague", evidence=["built in 1911 by the engineer Arla Tesk"],
         reference="Arla Tesk."),
    item("boom", "BOOM how long is sourdough proofed?", evidence=["eighteen hours"], reference="Eighteen hours."),
    item("q3", "What is the population of Mars City?", typ="unanswerable"),
    item("q4", "What fee do market stalls pay?", evidence=["twelve coins per day"], reference="Twelve coins a day."),
]


class Script:
    """Replies per role and question; records every question asked of each role. ``boom`` raises ModelError."""

    def __init__(self, boom: bool):
        self.boom, self.asked, self.lock = boom, [], threading.Lock()

    def __call__(self, messages):
        system, last = messages[0]["content"], messages[-1]["content"]
        question = re.search(r"\[\[ ## question ## \]\]\n(.*?)\n", last).group(1)
        role = ("judge" if "Grade a candidate answer" in system else "grader" if "contain the information" in system
                else "rewriter" if "new search query" in system else "answerer")
        with self.lock:
            self.asked.append((role, question))
            first_grade = sum(1 for r, q in self.asked if (r, q) == ("grader", question)) == 1
        if self.boom and question.startswith("BOOM"):
            raise ModelError("scripted provider outage")
        ids = re.findall(r"\[\d+\] \[([^\]]+)\]", last)
        target = next((it for it in ITEMS if it.question == question), None)
        gold_here = [c for c in ids if target and any(e in DOCS[c][1] for e in target.evidence)]
        if role == "grader":
            if question.startswith("Who made") and first_grade:  # the vague question always needs one rewrite
                return {"reason": "nothing about crossings", "relevant": False, "relevant_chunk_ids": []}
            return {"reason": "checked", "relevant": bool(gold_here), "relevant_chunk_ids": gold_here}
        if role == "rewriter":
            return {"query": "Velmora glass bridges engineer" if question.startswith("Who made") else "Mars City census"}
        if role == "answerer":
            cited = gold_here + (["made-up#007"] if question.startswith("What fee") else [])
            return {"answer": f"Answer to {question} " + " ".join(f"[{c}]" for c in cited), "cited_ids": cited}
        return {"reason": "matches", "correct": True, "faithful": True}


class ScriptedLM(DummyLM):
    """A DummyLM that formats ``script(messages)``'s fields with its adapter (ChatAdapter by default)."""

    def __init__(self, script, adapter=None):
        super().__init__({}, adapter=adapter)
        self.script = script
        self._bind()

    def _bind(self):
        self._engine_spec = _ScriptEngine(self)
        self._async_engine_spec = AsyncDummyEngine(self._engine_spec)

    def copy(self, **kwargs):
        new = super().copy(**kwargs)
        new._bind()
        return new


class _ScriptEngine(DummyEngine):
    def _complete_messages(self, messages):
        text = self.owner._format_answer_fields(self.owner.script(messages))
        return Response(id=None, model="dummy", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=len(str(messages)) // 4, output_tokens=len(text) // 4,
                                    total_tokens=0))


@pytest.fixture(autouse=True)
def reset_dspy():
    yield
    dspy.configure(lm=None, adapter=None)


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval-index")
    settings = Settings(index_dir=root / "index", cache_dir=root / "cache", mode="hybrid", top_k=2)
    chunks = [Chunk(id=cid, text=text, title=title, source=cid.split("#")[0]) for cid, (title, text) in DOCS.items()]
    index = build_index(chunks, settings.index_dir, settings, show_progress=False)
    return Retriever(index, mode="hybrid", top_k=2, candidates=8)


def agent_with(retriever, script, adapter=None):
    lm = ScriptedLM(script, adapter=adapter)
    dspy.configure(lm=lm, adapter=adapter)
    return Sieve(retriever, max_rewrites=1, use_reflection=True, top_k=2), lm


@pytest.mark.slow
def test_run_resumes_after_an_abort_without_rerunning_items(retriever, tmp_path):
    out = tmp_path / "run"
    first = Script(boom=True)
    agent, lm = agent_with(retriever, first)
    with pytest.raises(ModelError, match="scripted provider outage"):
        run_eval(ITEMS, agent, lm, out, "full", chunks=retriever.index.chunks, ghash="h1", show_progress=False)
    assert [r["id"] for r in read_records(out)] == ["q1", "q2"]
    partial = json.loads((out / "summary.json").read_text())
    assert (partial["n_done"], partial["n_selected"], partial["complete"]) == (2, 5, False)

    second = Script(boom=False)
    agent, lm = agent_with(retriever, second)
    summary = run_eval(ITEMS, agent, lm, out, "full", chunks=retriever.index.chunks, ghash="h1", show_progress=False)
    records = read_records(out)
    assert sorted(r["id"] for r in records) == sorted(it.id for it in ITEMS)  # each item exactly once
    assert {q for _, q in second.asked}.isdisjoint({ITEMS[0].question, ITEMS[1].question})  # done items not rerun
    assert (summary["n_done"], summary["complete"]) == (5, True)

    by_id = {r["id"]: r for r in records}
    assert by_id["q3"]["prediction"]["refused"] and by_id["q3"]["scores"]["rewrites"] == 1
    assert by_id["q2"]["scores"]["rewrites"] == 1 and by_id["q2"]["scores"]["rewrite_successes"] == 1
    assert by_id["q2"]["gold_ids"] == ["bridges.md#000"]
    assert by_id["q4"]["prediction"]["invalid_citations"] == ["made-up#007"]
    assert by_id["q1"]["judge"]["correct"] is True and by_id["q3"]["judge"] is None
    steps = by_id["q1"]["prediction"]["trace"]["steps"]
    assert [s["node"] for s in steps] == ["retrieve", "grade", "answer"]
    assert steps[0]["hits"][0]["stages"]["bm25"]["rank"] is not None  # the real retriever's stages are kept
    m = summary["metrics"]
    assert m["correct_refusal_rate"] == 1.0 and m["false_refusal_rate"] == 0.0
    assert m["e2e_accuracy"] == 1.0  # all four answerable items answered and judged correct
    assert m["citation_validity"] == pytest.approx(4 / 5)  # one valid citation each, plus one invalid on q4
    assert m["rewrites_per_answerable"] == pytest.approx(1 / 4)
    assert m["tokens_in_per_query"] > 0


def test_a_run_resumes_when_only_other_items_of_the_golden_file_changed(retriever, tmp_path, capsys):
    """A split appended to the golden file changes its hash, not the items a run selected: the run resumes. A
    selected item that changed does not (its finished results would describe another question)."""
    from rag.errors import InputError

    out = tmp_path / "run"
    agent, lm = agent_with(retriever, Script(boom=True))
    with pytest.raises(ModelError):
        run_eval(ITEMS, agent, lm, out, "full", chunks=retriever.index.chunks, ghash="h1", show_progress=False)
    agent, lm = agent_with(retriever, Script(boom=False))
    summary = run_eval(ITEMS, agent, lm, out, "full", chunks=retriever.index.chunks, ghash="h2", show_progress=False)
    assert (summary["n_done"], summary["complete"], summary["golden_hash"]) == (5, True, "h2")
    assert json.loads((out / "run.json").read_text())["golden_hash"] == "h2"
    assert "none of the items it selects did: resuming" in capsys.readouterr().err
    edited = [*ITEMS[:-1], item("q4", "What fee do market stalls pay?", reference="Ten coins.")]
    with pytest.raises(InputError, match="different golden_hash"):
        run_eval(edited, agent, lm, out, "full", chunks=retriever.index.chunks, ghash="h3", show_progress=False)


@pytest.mark.slow
def test_parallel_threads_with_json_adapter_match_sequential(retriever, tmp_path):
    items = [it for it in ITEMS if it.id != "boom"]
    results = {}
    for threads in (1, 3):
        agent, lm = agent_with(retriever, Script(boom=False), adapter=dspy.JSONAdapter())
        results[threads] = run_eval(items, agent, lm, tmp_path / f"t{threads}", "full", chunks=retriever.index.chunks,
                                    ghash="h2", threads=threads, show_progress=False)
        assert sorted(r["id"] for r in read_records(tmp_path / f"t{threads}")) == sorted(it.id for it in items)
    keys = ("e2e_accuracy", "correct_refusal_rate", "grader_set_precision", "grader_set_recall", "recall_at_k",
            "needle_recall", "citation_validity", "steps_mean")
    assert {k: results[1]["metrics"][k] for k in keys} == {k: results[3]["metrics"][k] for k in keys}


def test_limit_and_agent_errors_are_recorded(retriever, tmp_path):
    def crash_on_fee(messages):
        if "market stalls" in messages[-1]["content"]:
            raise ValueError("unparseable reply")
        return Script(boom=False)(messages)

    agent, lm = agent_with(retriever, crash_on_fee)
    items = [ITEMS[3], ITEMS[4], ITEMS[0]]
    summary = run_eval(items, agent, lm, tmp_path / "run", "full", chunks=retriever.index.chunks, ghash="h3",
                       limit=2, show_progress=False)
    records = read_records(tmp_path / "run")
    assert [r["id"] for r in records] == ["q3", "q4"] and summary["n_selected"] == 2
    assert records[1]["status"] == "error" and "unparseable reply" in records[1]["error"]
    assert summary["counts"]["errors"] == 1 and summary["metrics"]["e2e_accuracy"] == 0.0


def test_a_run_killed_outright_still_knows_its_selection(retriever, tmp_path):
    """summary.json holds the selection before the first item runs: a SIGKILL mid-run (no except clause runs)
    leaves rag report saying how many of the selected items are done, not "n/n complete"."""
    from rag.report.markdown import load_run

    out = tmp_path / "run"
    seen = []

    def kill_on_second(messages):
        if "see-through crossings" in messages[-1]["content"]:
            seen.append(json.loads((out / "summary.json").read_text()))
            raise SystemExit("killed")  # stands in for a death that skips the end-of-run summary
        return Script(boom=False)(messages)

    agent, lm = agent_with(retriever, kill_on_second)
    items = [ITEMS[0], ITEMS[1], ITEMS[3]]
    with pytest.raises(SystemExit):
        run_eval(items, agent, lm, out, "full", chunks=retriever.index.chunks, ghash="h4", show_progress=False)
    assert seen and (seen[0]["n_selected"], seen[0]["complete"]) == (3, False)
    (out / "summary.json").write_text(json.dumps(seen[0]))  # what a SIGKILL at that moment leaves on disk
    with pytest.warns(UserWarning, match="recomputed"):
        run = load_run(out)
    assert (run["summary"]["n_done"], run["summary"]["n_selected"], run["summary"]["complete"]) == (1, 3, False)
