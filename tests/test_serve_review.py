"""The review of a golden set on the page, through its JSON API (rag serve --review FILE, rag.serve.goldenview): the
listing with the counts rag golden check prints, one item with its passages from the index it was drafted from
(a real tiny index) and the model's proposal, a human's decision written into the file at once (an edit keeps
edited_from) through the same function the terminal review uses, 404 without --review, 409 when the file changed
on disk since the item was shown, and bad input as a 400 that names the field. No model is called."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from rag.curate.review import review_golden, write_records
from rag.errors import InputError
from rag.report.golden_checks import review_lines, review_summary
from rag.serve.app import create_app
from rag.serve.evalview import RunBrowser
from rag.serve.goldenview import GoldenReview
from rag.serve.programs import Programs
from rag.serve.server import Background
from tests.catalogue_support import check, run_cli
from tests.serve_support import FIXTURE_RUNS, ROOT

MODEL = "groq/qwen/qwen3-32b"
XSS_QUESTION = '<img src=x onerror="window.__xss = 1"> what does <b>with</b> call?'


def items(index_dir):
    draft = {"index": str(index_dir), "n": 5, "seed": 0}  # as rag golden draft records it on each item
    return [
        {"id": "r1", "type": "answerable", "question": "What does the with statement call before the block runs?",
         "reference_answer": "__enter__.", "relevant_chunk_ids": ["with#001"], "seed_chunk_id": "with#001",
         "split": "test", "drafted_by": "drafter", "draft": draft},
        {"id": "r2", "type": "vague", "question": "how do i make a function with no name",
         "reference_answer": "With a lambda expression.", "relevant_chunk_ids": ["lambda#001", "gone#404"],
         "seed_chunk_id": "lambda#001", "split": "test", "drafted_by": "drafter", "draft": draft,
         "review": "accept", "reviewed_by": MODEL, "review_reason": "the passage states lambda",
         "auto_review": {"review": "accept", "reviewed_by": MODEL, "reason": "the passage states lambda",
                         "prompt_version": "golden-review/1-x"}},
        {"id": "r3", "type": "unanswerable", "question": "Where can yield expressions be used?",
         "reference_answer": "Not covered by the indexed documents.", "should_refuse": True, "relevant_chunk_ids": [],
         "seed_chunk_id": "yield#001", "split": "dev", "drafted_by": "drafter", "draft": draft,
         "review": "reject", "reviewed_by": MODEL, "review_reason": "the passage answers it",
         "auto_review": {"review": "reject", "reviewed_by": MODEL, "reason": "the passage answers it"}},
        {"id": "r4", "type": "answerable", "question": "Which method implements len()?", "reference_answer": "__len__.",
         "relevant_chunk_ids": ["len#001"], "seed_chunk_id": "len#001", "split": "test", "drafted_by": "drafter",
         "draft": draft, "review": "reject", "reviewed_by": "human"},
        {"id": "r5", "type": "answerable", "question": XSS_QUESTION, "reference_answer": "<script>x</script>",
         "relevant_chunk_ids": ["with#001"], "seed_chunk_id": "with#001", "split": "test", "draft": draft},
    ]


def rows(path):
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def app_for(index, review=None):
    programs = Programs(["top_k=3"], builder=lambda settings, use_artifact: None, index=index)  # never asked
    browser = RunBrowser(FIXTURE_RUNS, golden_dir=ROOT / "golden", artifacts_dir=ROOT / "artifacts")
    return create_app(programs, browser, examples=[], review=review)


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    return tmp_path_factory.mktemp("review") / "mine.jsonl"


@pytest.fixture(scope="module")
def server(tiny_index, golden):
    write_records(golden, items(tiny_index.dir))
    with Background(app_for(tiny_index, GoldenReview(golden))) as url, httpx.Client(base_url=url, timeout=60) as c:
        yield c


@pytest.fixture
def client(server, golden, tiny_index):
    """The server, its file written afresh for each test."""
    write_records(golden, items(tiny_index.dir))
    return server


def decide(client, **body):
    return client.post("/api/review/decide", json=body)


def test_the_listing_has_every_item_its_state_and_the_counts_of_golden_check(client, golden):
    info = client.get("/api/info").json()["review"]
    assert info == {"file": str(golden), "name": "mine.jsonl"}
    d = client.get("/api/review").json()
    assert [(i["id"], i["review"], i["kind"], i["reviewed_by"]) for i in d["items"]] == [
        ("r1", None, None, None), ("r2", "accept", "model", MODEL), ("r3", "reject", "model", MODEL),
        ("r4", "reject", "human", "human"), ("r5", None, None, None)]
    assert d["items"][4]["question"] == XSS_QUESTION  # as written: the page inserts it as text
    s = d["summary"]
    expected = review_summary(rows(golden).values())
    assert s["lines"] == review_lines(expected)  # the very lines rag golden check prints
    assert (s["items"], s["reviewed"], s["human"], s["model"], s["kept"]) == (5, 3, 1, 2, 1)
    assert s["decisions"] == {"accept": {"human": 0, "model": 1}, "edit": {"human": 0, "model": 0},
                              "reject": {"human": 1, "model": 1}}
    assert s["models"] == {MODEL: 2} and len(d["version"]) == 16


def test_an_item_shows_its_gold_and_seed_passages_from_the_drafted_index_and_the_models_proposal(client, tiny_index):
    it = client.get("/api/review/item", params={"id": "r2"}).json()
    assert (it["id"], it["type"], it["position"], it["total"]) == ("r2", "vague", 1, 5)
    assert it["reference_answer"] == "With a lambda expression." and it["passages_from"] == str(tiny_index.dir)
    lam, gone = it["passages"]
    assert lam["id"] == "lambda#001" and lam["gold"] and lam["seed"] and lam["title"] == "Lambdas"
    assert lam["text"].startswith("Lambda expressions (sometimes called lambda forms)")
    assert gone == {"id": "gone#404", "gold": True, "seed": False, "missing": True}
    assert it["proposal"] == {"review": "accept", "model": MODEL, "reason": "the passage states lambda", "current": True}
    r3 = client.get("/api/review/item", params={"id": "r3"}).json()
    assert [(p["id"], p["gold"], p["seed"]) for p in r3["passages"]] == [("yield#001", False, True)]
    assert client.get("/api/review/item", params={"id": "r1"}).json()["proposal"] is None
    missing = client.get("/api/review/item", params={"id": "nope"})
    assert missing.status_code == 404 and "no item 'nope'" in missing.json()["error"]


def test_a_decision_is_written_at_once_and_an_edit_keeps_the_old_wording(client, golden):
    version = client.get("/api/review/item", params={"id": "r1"}).json()["version"]
    r = decide(client, id="r1", decision="accept", version=version)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["decided"] == {"id": "r1", "review": "accept", "reviewed_by": "human"}
    assert rows(golden)["r1"]["review"] == "accept" and rows(golden)["r1"]["reviewed_by"] == "human"
    assert d["version"] != version and d["summary"]["human"] == 2 and d["items"][0]["kind"] == "human"
    # an edit of the item the model kept: the new wording, the old one in edited_from, the model's view in auto_review
    r = decide(client, id="r2", decision="edit", version=d["version"], question="  How do I write an anonymous function? ",
               reference_answer="With a lambda expression.")
    assert r.status_code == 200 and r.json()["decided"]["review"] == "edit", r.text
    r2 = rows(golden)["r2"]
    assert r2["question"] == "How do I write an anonymous function?" and r2["review"] == "edit"
    assert r2["edited_from"] == {"question": "how do i make a function with no name",
                                 "reference_answer": "With a lambda expression."}
    assert r2["reviewed_by"] == "human" and "review_reason" not in r2 and r2["auto_review"]["review"] == "accept"
    # an edit that changes nothing is an accept; a reject; the page's item r3 now shows the model had proposed
    version = r.json()["version"]
    r = decide(client, id="r5", decision="edit", version=version, question=XSS_QUESTION)
    assert r.json()["decided"]["review"] == "accept" and "edited_from" not in rows(golden)["r5"]
    r = decide(client, id="r3", decision="reject", version=r.json()["version"])
    assert r.status_code == 200 and rows(golden)["r3"]["reviewed_by"] == "human"
    it = client.get("/api/review/item", params={"id": "r3"}).json()
    assert it["proposal"]["current"] is False and it["proposal"]["review"] == "reject"
    assert r.json()["summary"]["lines"] == review_lines(review_summary(rows(golden).values()))
    # the terminal review goes on from there: every item now has a human decision
    assert review_golden(golden, ask=lambda _p: pytest.fail("nothing left to ask"), show=lambda _t: None) == {}


def test_without_review_the_endpoints_answer_404_and_info_has_no_review(tiny_index):
    with Background(app_for(tiny_index)) as url, httpx.Client(base_url=url, timeout=60) as c:
        assert c.get("/api/info").json()["review"] is None
        for r in (c.get("/api/review"), c.get("/api/review/item", params={"id": "r1"}),
                  c.post("/api/review/decide", json={"id": "r1", "decision": "accept", "version": "x"})):
            assert r.status_code == 404 and "rag serve --review FILE" in r.json()["error"], r.text


def test_a_file_changed_since_the_item_was_shown_is_refused_with_409_and_left_as_it_is(client, golden):
    version = client.get("/api/review/item", params={"id": "r1"}).json()["version"]
    # meanwhile the terminal review rejects r1
    replies = iter(["r", "q"])
    assert review_golden(golden, ask=lambda _p: next(replies), show=lambda _t: None) == {"reject": 1}
    before = golden.read_bytes()
    r = decide(client, id="r1", decision="accept", version=version)
    assert r.status_code == 409 and "mine.jsonl changed on disk since this item was shown" in r.json()["error"]
    assert "reload the review" in r.json()["error"] and golden.read_bytes() == before
    # reloaded, the item shows the terminal's decision and a new decision goes through
    again = client.get("/api/review/item", params={"id": "r1"}).json()
    assert again["review"] == "reject" and again["kind"] == "human"
    assert decide(client, id="r1", decision="accept", version=again["version"]).status_code == 200
    assert rows(golden)["r1"]["review"] == "accept"


def test_two_decisions_on_the_same_version_at_once_write_one_and_refuse_the_other(client, golden):
    version = client.get("/api/review").json()["version"]
    results = {}

    def send(item_id):
        results[item_id] = decide(client, id=item_id, decision="accept", version=version).status_code

    threads = [threading.Thread(target=send, args=(i,)) for i in ("r1", "r5")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results.values()) == [200, 409], results
    written = [i for i in ("r1", "r5") if rows(golden)[i].get("review") == "accept"]
    assert written == [i for i, code in results.items() if code == 200]


@pytest.mark.parametrize(("body", "says"), [
    ([1, 2], "the body must be a JSON object"),
    ({"decision": "accept", "version": "v"}, "id: required"),
    ({"id": "r1", "decision": "skip", "version": "v"}, "decision: must be accept, edit or reject, got 'skip'"),
    ({"id": "r1", "decision": "accept"}, "version: required"),
    ({"id": "r1", "decision": "accept", "version": "v", "question": "new"}, "question: sent with decision accept"),
    ({"id": "r1", "decision": "edit", "version": "v", "question": 3}, "question: must be a string, got int"),
    ({"id": "r1", "decision": "edit", "version": "v", "question": "  "}, "question: empty"),
    ({"id": "r1", "decision": "edit", "version": "v"}, "question: an edit sends the new question"),
    ({"id": "r1", "decision": "edit", "version": "v", "question": "x" * 5000}, "question: 5000 characters"),
    ({"id": "r1", "decision": "edit", "version": "v", "reference_answer": "\ud800"},
     "reference_answer: character 1 is U+D800"),
])
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(client, golden, body, says):
    before = golden.read_bytes()
    r = client.post("/api/review/decide", content=json.dumps(body).encode(), headers={"content-type": "application/json"})
    assert r.status_code == 400 and says in r.json()["error"], r.text
    assert golden.read_bytes() == before


def test_an_empty_reference_answer_is_refused_when_the_item_had_one_and_a_body_that_is_not_json_too(client, golden):
    version = client.get("/api/review").json()["version"]
    r = decide(client, id="r1", decision="edit", version=version, question="Q?", reference_answer=" ")
    assert r.status_code == 400 and r.json()["error"].startswith("reference_answer: empty"), r.text
    r = client.post("/api/review/decide", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"].startswith("the body is not JSON")
    assert decide(client, id="zz", decision="accept", version=version).status_code == 404
    assert "review" not in rows(golden)["r1"]


def test_rag_serve_review_needs_a_golden_file_that_reads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check(run_cli("serve", "--review", tmp_path / "none.jsonl", "--port", "0"), 1,
          r"^Error: --review: .*none\.jsonl: no such golden file")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "type": "answerable"}\n', encoding="utf-8")
    check(run_cli("serve", "--review", bad, "--port", "0"), 1, r"^Error: --review: .*bad\.jsonl:1: field 'question'")
    with pytest.raises(InputError, match="--review: .*bad.jsonl:1"):
        GoldenReview(bad)
