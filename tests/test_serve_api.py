"""rag serve's JSON API against a real uvicorn server on loopback: the real agent over a real index (built as
`rag index DIR` builds it), with a DummyLM per role scripting the control flow; the committed fixture runs and
artifact for the evaluation browser."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import httpx
import pytest

from rag.agent.module import REFUSAL
from rag.errors import InputError
from rag.report import analysis, compare
from rag.serve.app import MAX_HISTORY_CHARS, MAX_HISTORY_TURNS
from rag.serve.server import bind, is_loopback
from tests.serve_support import (  # noqa: F401
    ANSWERABLE,
    FIXTURE_RUNS,
    FOLLOW_UP,
    PASS_ID,
    ROOT,
    SLOW,
    STANDALONE,
    UNANSWERABLE,
    WITH_ID,
    gate,
    scripted_lms,
    serve,
    serve_index,
    server_runner,
)

ALSO = "Which statements wrap a block or do nothing?"  # the answerer reads two passages and cites one


def with_uncited(lms):
    """The scripted models, plus ALSO: the grader accepts the with and the pass passages, the answerer cites pass."""
    lms["grader"].answers[ALSO] = {"subject": "pass", "relevant": True, "relevant_chunk_ids": [WITH_ID, PASS_ID],
                                   "reason": "one passage says what pass does"}
    lms["answerer"].answers[ALSO] = {"cited_ids": [PASS_ID], "answer": f"pass does nothing [{PASS_ID}]."}
    return lms


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return serve_index(tmp_path_factory)


@pytest.fixture(scope="module")
def client(index, gate):
    with serve(index, gate, lms=with_uncited(scripted_lms(gate))) as url, httpx.Client(base_url=url, timeout=120) as c:
        yield c


def events(response):
    """(kind, data) for each server-sent event, as they arrive."""
    kind = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            yield kind, json.loads(line[6:])


def nodes(result):
    return [s["node"] for s in result["trace"]["steps"]]


def test_ask_answers_with_the_trace_citations_and_the_program_that_ran(client):
    r = client.post("/api/ask", json={"question": ANSWERABLE})
    assert r.status_code == 200, r.text
    d = r.json()
    assert nodes(d) == ["retrieve", "grade", "answer"] and not d["refused"]
    assert d["citations"] == [WITH_ID] and f"[{WITH_ID}]" in d["answer"]
    assert d["config"] == "full" and d["artifact"] is None
    assert d["description"].startswith("uncompiled signatures") and "scripted test program" in d["messages"][0]
    hits = d["trace"]["steps"][0]["hits"]
    assert [h["rank"] for h in hits] == [1, 2, 3] and WITH_ID in [h["chunk_id"] for h in hits]
    for h in hits:  # each hit's rank in bm25, dense and the fusion
        assert set(h["stages"]) >= {"bm25", "dense", "rrf"} and h["stages"]["rrf"]["rank"] == h["rank"]
    grade = d["trace"]["steps"][1]
    assert grade["verdict"] is True and grade["chosen_ids"] == [WITH_ID] and grade["model"] == "dummy"


def test_the_stream_sends_each_step_when_its_node_finishes(client, gate):
    """The grader of SLOW waits on the gate: retrieve has arrived while grade is still running, the page hears
    progress about the grade meanwhile, and the rest arrives once the grader answers."""
    gate.clear()
    try:
        with client.stream("GET", "/api/stream", params={"question": SLOW}) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            seen, stream = [], events(r)
            for kind, data in stream:
                seen.append((kind, data))
                if kind == "progress" and data.get("node") == "grade" and data["node_s"] >= 1.0:
                    break
            kinds = [k for k, _ in seen]
            assert kinds.index("program") < kinds.index("start") < kinds.index("step")
            steps = [d for k, d in seen if k == "step"]
            assert [s["node"] for s in steps] == ["retrieve"] and steps[0]["hits"]
            assert [d["node"] for k, d in seen if k == "start"] == ["retrieve", "grade"]
            assert "done" not in kinds
            gate.set()
            rest = list(stream)
    finally:
        gate.set()
    kinds = [k for k, _ in rest if k != "progress"]
    # the answerer writes through the runner's listener (as the embedded model does): its answer arrives as token
    # events (the text so far) after the answer node starts and before its step
    assert [k for k in kinds if k != "token"] == ["step", "start", "step", "done"]
    assert kinds.index("start") < kinds.index("token") and kinds[-3:] == ["token", "step", "done"]
    assert [d["node"] for k, d in rest if k == "step"] == ["grade", "answer"]
    done = rest[-1][1]
    assert done["citations"] == [PASS_ID] and nodes(done) == ["retrieve", "grade", "answer"]
    tokens = [d for k, d in rest if k == "token"]
    assert all(done["answer"].startswith(d["text"]) and d["index"] == 2 for d in tokens)


def test_the_passages_read_but_not_cited_are_listed_apart_in_the_answer_and_the_stream(client):
    """The answerer was given the passages of the answer step (shown_ids) and cited pass: ``uncited`` names the
    others, the with passage the grader accepted among them, in /api/ask and in the stream's ``done`` event alike."""
    d = client.post("/api/ask", json={"question": ALSO}).json()
    assert [s["chunk_id"] for s in d["sources"]] == [PASS_ID] and d["citations"] == [PASS_ID]
    shown = d["trace"]["steps"][-1]["shown_ids"]
    uncited = [s["chunk_id"] for s in d["uncited"]]
    assert uncited == [i for i in shown if i != PASS_ID] and WITH_ID in uncited and PASS_ID in shown
    assert all(s["title"] for s in d["uncited"])
    with client.stream("GET", "/api/stream", params={"question": ALSO}) as r:
        done = [data for kind, data in events(r) if kind == "done"][0]
    assert done["uncited"] == d["uncited"]
    refused = client.post("/api/ask", json={"question": UNANSWERABLE}).json()
    assert refused["uncited"] == [] and refused["closest"]


def test_an_unanswerable_question_is_refused_with_the_closest_passages(client):
    d = client.post("/api/ask", json={"question": UNANSWERABLE, "config": "full"}).json()
    assert d["refused"] and d["answer"] == REFUSAL
    assert nodes(d) == ["retrieve", "grade", "rewrite"] * 2 + ["retrieve", "grade", "refuse"]
    assert d["trace"]["steps"][2]["rewrite"] == "swallow airspeed velocity"
    assert d["closest"] and all(c["chunk_id"] for c in d["closest"])


def _committed_artifacts() -> list[str]:
    """The names of the compiled programs committed under artifacts/, sorted as the API lists them."""
    return sorted(p.parent.name for p in (ROOT / "artifacts").glob("*/manifest.json"))


def test_the_configuration_is_chosen_per_question(client):
    d = client.post("/api/ask", json={"question": ANSWERABLE, "config": "hybrid", "artifact": "none"}).json()
    assert nodes(d) == ["retrieve", "answer"]
    assert d["config"] == "hybrid" and d["settings"]["reflection"] is False
    info = client.get("/api/info").json()
    by_name = {c["name"]: c for c in info["configs"]}
    assert {"baseline", "hybrid", "full"} <= set(by_name) and by_name["full"]["default"]
    assert not by_name["hybrid_rerank"]["available"] and "reranker" in by_name["hybrid_rerank"]["why"]
    committed = _committed_artifacts()
    assert "smollm2-bootstrap" in committed and [a["name"] for a in info["artifacts"]] == committed


@pytest.mark.parametrize("body, status, words", [
    ({"question": "  "}, 400, "question: required"),
    ({}, 400, "question: required"),
    ([1, 2], 400, "must be a JSON object"),
    ({"question": "x" * 4001}, 400, "at most 4000"),
    ({"question": ANSWERABLE, "config": "nope"}, 400, "unknown configuration 'nope'"),
    ({"question": ANSWERABLE, "config": "hybrid_rerank"}, 400, "needs reranker"),
    ({"question": ANSWERABLE, "artifact": "../../etc"}, 400, "unknown artifact '../../etc'"),
    ({"question": ANSWERABLE, "config": 3}, 400, "must be strings"),
])
def test_bad_requests_get_one_clean_line(client, body, status, words):
    r = client.post("/api/ask", json=body)
    assert r.status_code == status and words in r.json()["error"], r.text


def test_bodies_that_are_not_json_or_too_big_are_refused(client):
    r = client.post("/api/ask", content=b"question=hi", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not JSON" in r.json()["error"]
    r = client.post("/api/ask", json={"question": "x" * 70_000})
    assert r.status_code == 413 and "over 65536 bytes" in r.json()["error"]

    def chunks():  # no Content-Length: the limit still holds
        for _ in range(70):
            yield b" " * 1000

    r = client.post("/api/ask", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    r = client.get("/api/stream")
    assert r.status_code == 400 and "question" in r.json()["error"]


def test_nothing_is_kept_without_keep_sql(client):
    """rag serve without --keep-sql writes no file: the page shows no keep button, and /api/keep is a 404."""
    assert client.get("/api/info").json()["keep_sql"] is None
    r = client.post("/api/keep", json={"question": "How many?", "sql": "SELECT 1"})
    assert r.status_code == 404 and "rag serve --keep-sql FILE" in r.json()["error"]


FIRST_TURN = {"question": ANSWERABLE, "answer": f"It wraps a block with a context manager's methods [{WITH_ID}]."}


def test_a_follow_up_is_condensed_from_its_history_and_the_standalone_question_is_searched(client):
    """The history is the first turn: the condenser (the rewriter's scripted model) makes the follow-up standalone,
    and that is what the retrieve step searched and the grader and answerer saw; the last question with the
    follow-up is searched beside it. The server keeps nothing: the same follow-up without history is not condensed."""
    d = client.post("/api/ask", json={"question": FOLLOW_UP, "history": [FIRST_TURN]}).json()
    assert nodes(d) == ["condense", "retrieve", "grade", "answer"], d.get("error")
    condense, retrieve = d["trace"]["steps"][:2]
    assert (condense["query"], condense["rewrite"]) == (FOLLOW_UP, STANDALONE)
    assert retrieve["query"] == STANDALONE and retrieve["expansions"] == [f"{ANSWERABLE} {FOLLOW_UP}"]
    assert d["citations"] == [PASS_ID] and "null operation" in d["answer"]
    with client.stream("POST", "/api/stream", json={"question": FOLLOW_UP, "history": [FIRST_TURN]}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        seen = [(k, data) for k, data in events(r) if k in ("start", "step", "done")]
    assert [data["node"] for k, data in seen if k == "start"] == ["condense", "retrieve", "grade", "answer"]
    assert seen[-1][0] == "done" and seen[-1][1]["trace"]["steps"][1]["query"] == STANDALONE
    with client.stream("GET", "/api/stream", params={"question": FOLLOW_UP, "history": json.dumps([FIRST_TURN])}) as r:
        done = [data for k, data in events(r) if k == "done"][0]
    assert nodes(done)[:2] == ["condense", "retrieve"] and done["trace"]["steps"][1]["query"] == STANDALONE
    alone = client.post("/api/ask", json={"question": ANSWERABLE, "history": []}).json()
    assert nodes(alone) == ["retrieve", "grade", "answer"]


TURN = {"question": "q", "answer": "a"}


@pytest.mark.parametrize("history, words", [
    ({"question": "q", "answer": "a"}, "history: got a JSON dict; send a JSON list of"),
    ("not json", "history: not JSON"),
    ([TURN, ["q", "a"]], "history[1]: each turn is {\"question\": str, \"answer\": str}, got list"),
    ([{"question": "q"}], "history[0]: each turn is {\"question\": str, \"answer\": str}, got ['question']"),
    ([{"question": "q", "answer": 3}], "history[0].answer: must be a string, got int"),
    ([{"question": " ", "answer": "a"}], "history[0].question: empty"),
    ([TURN] * (MAX_HISTORY_TURNS + 1), f"history: {MAX_HISTORY_TURNS + 1} turns, at most {MAX_HISTORY_TURNS}; send only "
                                       "the last ones"),
    ([{"question": "q", "answer": "x" * MAX_HISTORY_CHARS}],
     f"history: {MAX_HISTORY_CHARS + 1:,} characters in its turns, at most {MAX_HISTORY_CHARS:,}; send fewer turns"),
])
def test_a_malformed_or_oversize_history_is_a_400_naming_the_field_before_it_queues(client, history, words):
    for send in (lambda: client.post("/api/ask", json={"question": FOLLOW_UP, "history": history}),
                 lambda: client.post("/api/stream", json={"question": FOLLOW_UP, "history": history}),
                 lambda: client.get("/api/stream", params={"question": FOLLOW_UP, "history": history if isinstance(
                     history, str) else json.dumps(history)})):
        r = send()
        assert r.status_code == 400 and r.json()["error"].startswith(words), r.text
    assert server_runner(str(client.base_url).rstrip("/")).pending() == 0  # refused before it queued


def test_a_history_turn_with_a_lone_surrogate_is_named(client):
    body = b'{"question": "and then?", "history": [{"question": "q", "answer": "x \\udc00"}]}'
    r = client.post("/api/ask", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"].startswith("history[0].answer: character 3 is U+DC00"), r.text


def test_a_full_queue_answers_503_with_a_retry_hint(index):
    """One worker busy (its grader waits on the gate) and one question waiting fill a queue of 1: the next is refused."""
    gate = threading.Event()
    with serve(index, gate, max_waiting=1) as url, httpx.Client(base_url=url, timeout=120) as c:
        try:
            with c.stream("GET", "/api/stream", params={"question": SLOW}) as first:
                running = events(first)
                next(d for k, d in running if k == "start" and d["node"] == "grade")
                with c.stream("GET", "/api/stream", params={"question": SLOW}) as second:
                    waiting = events(second)
                    assert next(waiting) == ("progress", {"state": "queued", "ahead": 1, "phase": None, "detail": None,
                                                          "phase_s": None, "node": None, "node_s": None,
                                                          "total_s": pytest.approx(0, abs=1)})  # 1 running ahead
                    r = c.post("/api/ask", json={"question": ANSWERABLE})
                    assert r.status_code == 503 and r.headers["retry-after"] == "10"
                    assert "busy" in r.json()["error"] and "try again in 10 s" in r.json()["error"]
                    gate.set()
                    assert [k for k, _ in running][-1] == "done" and [k for k, _ in waiting][-1] == "done"
        finally:
            gate.set()
        assert c.post("/api/ask", json={"question": ANSWERABLE}).status_code == 200


def test_a_passage_shows_its_text_title_source_and_place_in_the_document(client):
    p = client.get("/api/chunk", params={"id": PASS_ID}).json()
    assert "pass is a null operation" in p["text"] and p["title"] == "Compound statements > The pass statement"
    assert p["source"] and (p["part"], p["parts"], p["doc_id"]) == (3, 3, "statements.md")
    assert p["previous"] == "statements.md#001" and p["next"] is None
    r = client.get("/api/chunk", params={"id": "../../etc/passwd"})
    assert r.status_code == 404 and "no passage" in r.json()["error"]


def test_runs_and_their_metrics_are_what_the_library_computes(client):
    listing = {r["name"]: r for r in client.get("/api/runs").json()["runs"]}
    assert set(listing) == {"baseline", "full"}
    full = listing["full"]
    assert (full["config"], full["golden"], full["golden_hash"], full["n_done"], full["n_selected"]) == \
        ("full", "python_ref.jsonl", "689cf3fb92d5", 8, 8)
    m = client.get("/api/metrics", params=[("run", "full"), ("run", "baseline")]).json()
    table = analysis.metric_table(analysis.load_runs([FIXTURE_RUNS / "full", FIXTURE_RUNS / "baseline"]))
    assert m["runs"] == ["full", "baseline"]
    assert [[r["metric"], *r["cells"]] for r in m["rows"]] == [[i, *row] for i, row in zip(table.index, table.values)]
    run = client.get("/api/runs/baseline").json()
    assert [(f["diagnosis"], f["id"]) for f in run["failures"]] == [("retrieval miss", "pyref-a-013")]
    assert run["failures"][0]["record"]["prediction"]["trace"]["steps"][0]["node"] == "retrieve"
    assert run["failure_counts"] == {"retrieval miss": 1}
    assert run["by_type"][0]["type"] == "answerable" and run["by_type"][0]["rows"][0]["value"].startswith("87.5%")
    png = client.get("/api/plots/metrics.png", params=[("run", "full"), ("run", "baseline")])
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")


@pytest.mark.parametrize("path", ["/api/runs/nope", "/api/runs/..%2F..%2Fetc", "/api/runs/%2Fetc%2Fpasswd",
                                  "/api/plots/evil.png?run=full", "/api/metrics?run=../baseline"])
def test_runs_are_looked_up_by_name_never_joined_into_a_path(client, path):
    r = client.get(path)
    assert r.status_code == 404 and r.json()["error"]


def test_artifacts_show_scores_before_and_after_and_the_chosen_prompts(client):
    arts = client.get("/api/artifacts").json()["artifacts"]
    committed = _committed_artifacts()
    assert "smollm2-bootstrap" in committed and [a["name"] for a in arts] == committed
    expected = compare.artifact_table(ROOT / "artifacts")
    for art in arts:
        rows = expected[expected.artifact == art["name"]]
        assert len(rows) > 0
        assert [(r["role"], r["dev_before"], r["dev_after"]) for r in art["roles"]] == \
            list(zip(rows.role, rows.dev_before, rows.dev_after))
        assert {p["role"] for p in art["prompts"]} >= {"grader", "answerer"}


def test_the_page_is_served_with_a_strict_content_security_policy(client):
    r = client.get("/")
    assert r.status_code == 200 and "<title>Sieve</title>" in r.text
    assert "script-src 'self'" in r.headers["content-security-policy"] and r.headers["x-content-type-options"] == "nosniff"
    assert client.get("/static/js/main.js").status_code == 200
    assert client.get("/static/../app.py").status_code == 404


def test_binding_is_loopback_by_default_and_a_busy_port_is_one_clean_error():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1")
    busy = bind("127.0.0.1", 0)
    port = busy.getsockname()[1]
    try:
        with pytest.raises(InputError, match=f"cannot listen on 127.0.0.1:{port}"):
            bind("127.0.0.1", port)
        out = subprocess.run([sys.executable, "-m", "rag", "serve", "--host", "0.0.0.0", "--port", str(port)],
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
    finally:
        busy.close()
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "no authentication" in out.stderr and f"Error: cannot listen on 0.0.0.0:{port}" in out.stderr


def test_rag_serve_keep_sql_needs_a_file_in_a_folder_that_exists(tmp_path, monkeypatch):
    """--keep-sql is checked before anything loads or binds: a folder, or a file in a missing folder, is one line."""
    from tests.catalogue_support import check, run_cli

    monkeypatch.chdir(tmp_path)
    check(run_cli("serve", "--keep-sql", tmp_path / "nowhere" / "k.jsonl", "--port", "0"), 1,
          r"^Error: --keep-sql .*k\.jsonl: the folder .*nowhere does not exist; create it first$")
    check(run_cli("serve", "--keep-sql", tmp_path, "--port", "0"), 1,
          r"^Error: --keep-sql .* is not a file; name a JSONL file \(created when missing\)$")
