"""Recorded runs (rag.serve.recordings, GET /api/recording): eval runs written by the real ``rag.eval.runner.run_eval``
with the scripted models of tests/serve_support.py are what the page plays back when the server is busy or loading.
A recording carries everything a live answer shows (the same steps, answer and sources), its date, models and
configuration; follow-ups, failed items and damaged lines are never played; the configuration asked for comes first;
the examples in /api/info say which have one; and the server itself writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from rag.agent.module import MAX_QUESTION_CHARS
from rag.eval.golden import GoldenItem
from rag.eval.presets import fingerprint
from rag.eval.runner import run_eval
from tests.serve_support import (  # noqa: F401
    ANSWERABLE,
    FOLLOW_UP,
    SLOW,
    UNANSWERABLE,
    WITH_ID,
    XSS,
    gate,
    scripted_lms,
    scripted_programs,
    serve,
    serve_index,
)

# the models a recorded run names (run.json's config.models, as rag eval writes it); the judge graded, it did not answer
MODELS = {"answerer": "scripted/recorder-1", "grader": "scripted/recorder-1", "rewriter": "scripted/recorder-1",
          "judge": "scripted/judge-1"}
MODEL = "scripted/recorder-1"
RECORDED = [ANSWERABLE, UNANSWERABLE, XSS]


def record_run(folder: Path, index, gate, config: str = "full", questions=RECORDED, follow_up: bool = False) -> Path:
    """An eval run of ``questions`` (and FOLLOW_UP after ANSWERABLE) in ``folder``, as ``rag eval`` writes one: the real
    runner over the scripted program of ``config``, unjudged."""
    lms = scripted_lms(gate)
    program, settings = scripted_programs(index, lms).get(config)
    items = [GoldenItem(id=f"rec-{i}", type="unanswerable" if q == UNANSWERABLE else "answerable", question=q,
                        reference_answer="", should_refuse=q == UNANSWERABLE, split="dev")
             for i, q in enumerate(questions)]
    if follow_up:
        items.append(GoldenItem(id="rec-follow", type="answerable", question=FOLLOW_UP, reference_answer="",
                                should_refuse=False, split="dev",
                                history=[{"question": ANSWERABLE, "answer": "It wraps a block."}]))
    run_eval(items, program.agent, None, folder, config, chunks=index.chunks, ghash="recorded",
             config={**fingerprint(settings), "models": MODELS}, judge=False, show_progress=False)
    return folder


def records(folder: Path) -> dict[str, dict]:
    lines = (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["question"]: r for r in map(json.loads, lines)}


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return serve_index(tmp_path_factory)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, index, gate) -> Path:
    root = tmp_path_factory.mktemp("recorded-runs")
    record_run(root / "eval-full", index, gate, follow_up=True)
    record_run(root / "eval-baseline", index, gate, config="baseline", questions=[ANSWERABLE])
    return root


@pytest.fixture(scope="module")
def client(index, gate, runs):
    with serve(index, gate, runs=runs) as url, httpx.Client(base_url=url, timeout=120) as c:
        yield c


def test_a_recording_is_the_eval_runs_record_with_its_date_models_and_configuration(client, runs):
    r = client.get("/api/recording", params={"question": ANSWERABLE, "config": "full"})
    assert r.status_code == 200, r.text
    rec, written = r.json(), records(runs / "eval-full")[ANSWERABLE]
    assert (rec["run"], rec["item"], rec["config"]) == ("eval-full", "rec-0", "full")
    assert rec["recorded_at"] == written["finished_at"] and rec["models"] == MODELS
    assert rec["settings"] == {"mode": "hybrid", "top_k": 3, "reflection": True, "max_rewrites": 2, "reranker": None,
                               "artifact": None}
    assert [(s["index"], s["node"]) for s in rec["steps"]] == [(0, "retrieve"), (1, "grade"), (2, "answer")]
    assert rec["steps"] == [{**s, "index": i} for i, s in enumerate(written["prediction"]["trace"]["steps"])]
    # the done payload is the record's prediction with what answered it, as a live answer's done event
    assert rec["done"] == {**written["prediction"], "config": "full", "models": MODELS, "settings": rec["settings"]}


def test_a_recording_has_what_the_live_answer_to_the_same_question_shows(client):
    live = client.post("/api/ask", json={"question": ANSWERABLE}).json()
    done = client.get("/api/recording", params={"question": ANSWERABLE, "config": "full"}).json()["done"]
    for key in ("answer", "refused", "citations"):
        assert done[key] == live[key], key
    without_text = lambda passages: [{k: v for k, v in s.items() if k != "text"} for s in passages]  # noqa: E731
    for key in ("sources", "closest"):  # the live answer adds each passage's text for its cards; a record has none
        assert done[key] == without_text(live[key]), key
    assert done["citations"] == [WITH_ID] and done["sources"][0]["chunk_id"] == WITH_ID
    assert [s["node"] for s in done["trace"]["steps"]] == [s["node"] for s in live["trace"]["steps"]]
    assert set(done["trace"]["totals"]) == set(live["trace"]["totals"])


def test_the_configuration_asked_for_comes_first_and_spaces_around_the_question_do_not_matter(client):
    ask = lambda **p: client.get("/api/recording", params={"question": ANSWERABLE, **p}).json()  # noqa: E731
    assert (ask(config="baseline")["run"], ask(config="baseline")["settings"]["mode"]) == ("eval-baseline", "dense")
    assert ask(config="full")["run"] == "eval-full"
    assert client.get("/api/recording", params={"question": f"  {ANSWERABLE}\n"}).status_code == 200
    # a configuration no run answered with: another's recording, which says which it is
    assert ask(config="hybrid")["config"] in ("full", "baseline")


def test_no_recording_is_a_404_and_bad_input_a_400(client):
    r = client.get("/api/recording", params={"question": "What does the yield statement do?"})
    assert r.status_code == 404 and "no recorded run of this question" in r.json()["error"]
    assert client.get("/api/recording", params={"question": ANSWERABLE.upper()}).status_code == 404  # exact match
    r = client.get("/api/recording", params={"question": "x" * (MAX_QUESTION_CHARS + 1)})
    assert r.status_code == 400 and r.json()["error"].startswith("query.question")
    assert client.get("/api/recording", params={"question": "   "}).status_code == 400
    assert client.get("/api/recording").status_code == 400
    assert client.get("/api/recording", params={"question": ANSWERABLE, "config": "c" * 201}).status_code == 400


def test_follow_ups_failed_items_and_damaged_lines_are_never_played(tmp_path, index, gate):
    run = record_run(tmp_path / "runs" / "eval-full", index, gate, questions=[ANSWERABLE], follow_up=True)
    assert [s["node"] for s in records(run)[FOLLOW_UP]["prediction"]["trace"]["steps"]][0] == "condense"
    failed = {**records(run)[ANSWERABLE], "id": "rec-x", "question": SLOW, "status": "error", "prediction": None,
              "error": "RuntimeError: boom"}
    with (run / "results.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(failed) + "\n")
        fh.write('{"id": "torn", "question": "' + UNANSWERABLE + '", "prediction": {"answ\n')
    with serve(index, gate, runs=tmp_path / "runs") as url, httpx.Client(base_url=url, timeout=120) as c:
        for question in (FOLLOW_UP, SLOW, UNANSWERABLE):
            assert c.get("/api/recording", params={"question": question}).status_code == 404, question
        assert c.get("/api/recording", params={"question": ANSWERABLE}).status_code == 200


def test_the_examples_say_which_have_a_recording_and_the_server_writes_none(client, runs):
    before = {p: p.stat().st_mtime_ns for p in runs.rglob("*")}
    examples = {e["question"]: e["recording"] for e in client.get("/api/info").json()["examples"]}
    assert set(examples) == {ANSWERABLE, UNANSWERABLE}
    # the server's default configuration first: the full run's, without its steps
    assert examples[ANSWERABLE]["run"] == "eval-full" and examples[ANSWERABLE]["models"] == MODELS
    assert "steps" not in examples[ANSWERABLE] and examples[UNANSWERABLE]["item"] == "rec-1"
    assert client.post("/api/ask", json={"question": UNANSWERABLE}).status_code == 200
    assert {p: p.stat().st_mtime_ns for p in runs.rglob("*")} == before


def test_examples_with_a_recording_come_first_then_the_dev_split(tmp_path):
    from rag.serve import example_questions

    rows = [("a1", "answerable", "dev", "Asked on dev?"), ("a2", "answerable", "test", "Recorded on test?"),
            ("a3", "answerable", "dev", "Also on dev?"), ("u1", "unanswerable", "train", "Nobody knows?")]
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps({"id": i, "type": t, "split": s, "question": q, "reference_answer": "x",
                                          "should_refuse": t == "unanswerable"}) + "\n" for i, t, s, q in rows))
    asked: list[list[str]] = []

    def recorded(questions: list[str]) -> list[str]:
        asked.append(questions)
        return [q for q in questions if q.startswith("Recorded")]

    shown = example_questions(golden, per_type=2, recorded=recorded)
    assert [e["id"] for e in shown] == ["a2", "a1", "u1"]  # recorded first, then dev before the other splits
    assert sorted(asked[0]) == sorted(q for *_, q in rows)  # one lookup for the whole set
    assert [e["id"] for e in example_questions(golden, per_type=2)] == ["a1", "a3", "u1"]  # no runs: dev first
