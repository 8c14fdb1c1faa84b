"""The data route on the rag serve page, in real headless Chromium (Debian's chromium, driven by Playwright), over a
real index with tables (the ops demo, rag demo ops, plus a small table of untrusted text) and scripted programs
(DummyLM per role): the trace shows the route, sql and critique steps; a cited SQL result is listed under the
answer's sources with the statement the guard ran and its rows; an answer the critic never finds grounded carries
the low-confidence warning with the critic's reason; and untrusted text in a table cell, a SQL statement, the
router's or the critic's reason never runs as script.

Screenshots go to a temporary folder."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from dspy.clients.engines.dummy_engine import AsyncDummyEngine, DummyEngine
from dspy.utils import DummyLM

from rag.agent.sqltext import ASK
from rag.config import ROLES
from tests.browser_support import browser, completed_nodes, needs_chromium, open_page, screenshot, shots  # noqa: F401
from tests.serve_support import FIXTURE_RUNS, ROOT

pytestmark = needs_chromium

COUNT = "How many claims are open?"
FLAGGED = "How many claims have been paid?"
UNTRUSTED = "What do the notes say?"

OPEN_CLAIMS = "SELECT count(*) AS n FROM claims WHERE status = 'open'"
PAID_CLAIMS = "SELECT count(*) AS n FROM claims WHERE status = 'paid'"
CRITIC_REASON = "the result does not say 999 claims were paid"

# Untrusted text: if the page ever inserted any of it as HTML, window.__xss would be set (or a <b> would appear).
CELL = """<img src=x onerror="window.__xss='sql'">"""
ROUTE_REASON = """notes <img src=x onerror="window.__xss='route'">"""
REFUSED_SQL = """DELETE FROM notes WHERE note = '<img src=x onerror="window.__xss=''statement''">'"""
NOTES_SQL = """SELECT id, note AS "<b>note</b>" FROM notes WHERE id > 0 OR note = '<script>window.__xss=''run''</script>' ORDER BY id"""
NOTES_ANSWER = """Note 1 is <img src=x onerror="window.__xss='answer'"> [sql:1]."""
XSS_REASON = """<img src=x onerror="window.__xss='critic'"> is not in <b>the</b> result"""


# ---------------------------------------------------------------------------------------------- scripted models
class _ScriptEngine(DummyEngine):
    def _complete_messages(self, messages):
        prompt = str(messages[-1].get("content", ""))
        key = next((k for k, needles in self.owner.script.items() if all(n in prompt for n in needles)), "")
        return super()._complete_messages([*messages[:-1], {**messages[-1], "content": key}])


class ScriptedLM(DummyLM):
    """DummyLM whose answer is that of the first entry whose strings all occur in the prompt: a question and an
    output field (``[[ ## sql ## ]]``) tell apart the calls one role makes for one question (router and critic, SQL
    writer and answerer). A prompt no entry matches gets DummyLM's "No more responses" (an unusable output)."""

    def __init__(self, entries: list[tuple[tuple[str, ...], dict[str, Any]]]) -> None:
        # DummyLM's own lookup (a key contained in the prompt) is given the key of the entry that matched
        keys = [f"<entry {i}>" for i in range(len(entries))]
        super().__init__({k: answer for k, (_, answer) in zip(keys, entries, strict=True)})
        self.script = {k: needles for k, (needles, _) in zip(keys, entries, strict=True)}
        self._scripted()

    def _scripted(self) -> "ScriptedLM":
        self._engine_spec = _ScriptEngine(self)
        self._async_engine_spec = AsyncDummyEngine(self._engine_spec)
        return self

    def copy(self, **kwargs):  # rag.usage.metering calls each predictor on a copy; DummyLM.copy sets plain engines
        return super().copy(**kwargs)._scripted()


def out(name: str) -> str:
    """The header of an output (or input) field in a ChatAdapter prompt."""
    return f"[[ ## {name} ## ]]"


def scripted_lms(counts: dict[str, int]) -> dict[str, Any]:
    """The router and the critic are the grader's calls, the SQL writer and the answerer the answerer's; the SQL
    writer's prompt asks for a ```sql block (ASK, rag.agent.sqltext)."""
    grader = ScriptedLM([
        ((COUNT, out("source")), {"reason": "a count of rows", "source": "data"}),
        ((COUNT, out("grounded")), {"reason": "every claim is supported", "grounded": True}),
        ((FLAGGED, out("source")), {"reason": "a count of rows", "source": "data"}),
        ((FLAGGED, out("grounded")), {"reason": CRITIC_REASON, "grounded": False}),
        ((UNTRUSTED, out("source")), {"reason": ROUTE_REASON, "source": "data"}),
        ((UNTRUSTED, out("grounded")), {"reason": XSS_REASON, "grounded": False}),
    ])
    answerer = ScriptedLM([
        ((COUNT, ASK), {"sql": OPEN_CLAIMS}),
        ((COUNT, out("cited_ids")), {"cited_ids": ["sql:1"], "answer": f"There are {counts['open']} open claims [sql:1]."}),
        ((FLAGGED, ASK), {"sql": PAID_CLAIMS}),
        ((FLAGGED, out("cited_ids")), {"cited_ids": ["sql:1"], "answer": "There are 999 paid claims [sql:1]."}),
        ((UNTRUSTED, ASK, "error: "), {"sql": NOTES_SQL}),  # the correction, after the guard's refusal
        ((UNTRUSTED, ASK), {"sql": REFUSED_SQL}),
        ((UNTRUSTED, out("cited_ids")), {"cited_ids": ["sql:1"], "answer": NOTES_ANSWER}),
    ])
    return {"grader": grader, "answerer": answerer, "rewriter": answerer, "judge": answerer}


# ---------------------------------------------------------------------------------------------- index and server
@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    """The ops demo's policies and tables, plus a notes table whose text is markup, indexed as rag index does."""
    from rag.api import build_index
    from rag.config import load_settings
    from rag.data import Warehouse, discover_tables, write_ops_demo

    root = tmp_path_factory.mktemp("ops-serve")
    write_ops_demo(root / "demo")
    corpus = root / "demo" / "corpus"
    extra = root / "extra"
    extra.mkdir()
    quoted = CELL.replace('"', '""')
    (extra / "notes.csv").write_text(f'id,note\n1,"{quoted}"\n2,plain text\n3,\n', encoding="utf-8")
    settings = load_settings({"index_dir": root / "index"})
    index, _ = build_index(corpus, settings=settings, tables=[*discover_tables(corpus), *discover_tables(extra)])
    with Warehouse(index.tables_path) as w:
        counts = {"open": w.run(OPEN_CLAIMS).rows[0][0], "paid": w.run(PAID_CLAIMS).rows[0][0]}
    return index, counts


def data_programs(index: Any, lms: dict[str, Any]) -> Any:
    """The named configurations, each the real agent with the data route and the critic over ``index``'s tables,
    built as rag ask builds them (``data_stages``), with the scripted LMs."""
    from rag.agent.module import Sieve
    from rag.agent.program import Program, data_stages
    from rag.retrieval.retriever import Retriever
    from rag.serve.programs import Programs

    def build(settings, use_artifact: bool) -> Program:
        # the model router and critic: their reasons are the untrusted model text this page must show as text
        data, critic = data_stages(index, settings.replace(router="model", critic_checks="model"))
        assert data is not None and critic is not None and critic.retries == 1
        agent = Sieve(Retriever(index, mode=settings.mode, top_k=settings.top_k), max_rewrites=settings.max_rewrites,
                      top_k=settings.top_k, lms=lms, data=data, critic=critic)
        return Program(agent=agent, artifact=None, models={r: "dummy" for r in ROLES}, lms=lms,
                       messages=["scripted test program (DummyLM per role)"])

    return Programs(["top_k=3"], builder=build, index=index)


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """The file of rag serve --keep-sql: not there until a statement is kept."""
    return tmp_path_factory.mktemp("kept") / "my_sql.jsonl"


@pytest.fixture(scope="module")
def server(ops, kept):
    from rag.serve.app import create_app
    from rag.serve.evalview import RunBrowser
    from rag.serve.keeping import KeptQueries
    from rag.serve.server import Background

    index, counts = ops
    browser = RunBrowser(FIXTURE_RUNS, golden_dir=ROOT / "golden", artifacts_dir=ROOT / "artifacts")
    examples = [{"type": "data", "question": COUNT, "id": "ex-d"}]
    background = Background(create_app(data_programs(index, scripted_lms(counts)), browser, examples=examples,
                                       keep=KeptQueries(kept, lambda: index)))
    with background as base:
        # one question first: the first call through DSPy imports and warms up what every later one reuses
        reply = httpx.post(base + "/api/ask", json={"question": COUNT}, timeout=600)
        assert reply.status_code == 200, reply.text
        assert reply.json()["citations"] == ["sql:1"]
        yield base, background.server.config.app.state.runner


@pytest.fixture
def url(server):
    base, runner = server
    yield base
    deadline = time.monotonic() + 120  # a question a failed test left running ends before the next test
    while runner.pending() and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.fixture
def page(browser, url):
    with open_page(browser, url, strict=True) as pg:
        yield pg


def ask(page, question: str) -> None:
    page.fill("#question", question)
    page.click("#ask-btn")
    page.wait_for_selector("#answer")




def text(page, selector: str) -> str:
    return page.locator(selector).inner_text()


# ---------------------------------------------------------------------------------------------- tests
def test_a_data_question_shows_its_route_sql_and_critique_and_the_result_as_a_source(page, ops, shots):
    _, counts = ops
    n = str(counts["open"])
    ask(page, COUNT)
    assert completed_nodes(page) == ["route", "sql", "answer", "critique"]

    route = page.locator("#timeline li.step-route")
    assert route.locator(".node").text_content() == "Route"
    assert route.locator(".badge").inner_text() == "DATA"
    assert route.locator(".reason").inner_text() == "reason: a count of rows"

    sql = page.locator("#timeline li.step-sql")
    assert sql.locator(".node").text_content() == "SQL"
    assert sql.locator("pre.sql").first.inner_text() == OPEN_CLAIMS  # as the model wrote it
    ran = sql.locator(".sql-result pre.sql").inner_text()  # as the guard rewrote and ran it
    assert ran != OPEN_CLAIMS and "FROM claims WHERE status = 'open'" in ran and "LIMIT" in ran
    assert sql.inner_text().count("[sql:1]") == 1
    assert sql.locator(".sql-result th").all_inner_texts() == ["n"]
    assert sql.locator(".sql-result td").all_inner_texts() == [n]
    assert "not run" not in sql.inner_text()

    critique = page.locator("#timeline li.step-critique")
    assert critique.locator(".node").text_content() == "Critic"
    assert critique.locator(".badge").inner_text() == "GROUNDED"
    assert critique.locator(".muted").inner_text().strip() == "model check"  # the check that gave the verdict
    assert critique.locator(".reason").inner_text() == "reason: every claim is supported"
    assert critique.locator(".ids .chunk").all_inner_texts() == ["sql:1"]

    # the answer: the citation is a plain label (a SQL result has no passage to open), never a passage button
    assert text(page, "#answer .answer-text") == f"There are {n} open claims [sql:1]."
    assert page.locator("#answer .answer-text .cite span.chunk.sql-id").inner_text() == "sql:1"
    assert page.locator("#timeline button.chunk, #answer button.chunk").count() == 0
    assert page.locator("#low-confidence").count() == 0

    sources = page.locator("#answer ul.sources > li")
    assert sources.count() == 1
    assert sources.locator("span.chunk.sql-id").inner_text() == "sql:1" and "SQL result" in sources.inner_text()
    assert sources.locator("pre.sql").inner_text() == ran
    assert sources.locator("th").all_inner_texts() == ["n"] and sources.locator("td").all_inner_texts() == [n]
    page.locator("#answer ul.sources").scroll_into_view_if_needed()
    screenshot(page, shots, "serve-data-answer.png")


def test_an_answer_the_critic_never_finds_grounded_is_flagged_low_confidence(page, ops, shots):
    _, counts = ops
    ask(page, FLAGGED)
    assert completed_nodes(page) == ["route", "sql", "answer", "critique", "answer", "critique"]
    warning = page.locator("#answer #low-confidence.warning")
    assert warning.is_visible()
    assert warning.inner_text() == f"Low confidence, flagged by the grounding critic: {CRITIC_REASON}."
    critiques = page.locator("#timeline li.step-critique")
    assert critiques.locator(".badge").all_inner_texts() == ["NOT GROUNDED", "NOT GROUNDED"]
    assert critiques.locator(".reason").all_inner_texts() == [f"reason: {CRITIC_REASON}"] * 2
    assert "still not grounded" in " ".join(critiques.nth(1).locator(".note").all_inner_texts())
    assert f"written again after the critic: {CRITIC_REASON}" in text(page, "#timeline li.step-answer >> nth=1")
    assert text(page, "#answer .answer-text") == "There are 999 paid claims [sql:1]."
    assert page.locator("#answer ul.sources td").all_inner_texts() == [str(counts["paid"])]
    warning.scroll_into_view_if_needed()
    screenshot(page, shots, "serve-data-low-confidence.png")


def test_untrusted_text_from_tables_statements_and_reasons_is_shown_as_text_and_never_runs(page, shots):
    """A table cell, the SQL statements (the guard's refused one and the one that ran), a column alias, the router's
    and the critic's reasons and the answer carry <img onerror>, <script> and <b>."""
    ask(page, UNTRUSTED)
    assert completed_nodes(page) == ["route", "sql", "sql", "answer", "critique", "answer", "critique"]
    assert page.evaluate("window.__xss") is None
    assert page.evaluate("document.querySelectorAll('script').length") == 1  # main.js only
    assert page.locator("main img, dialog img").count() == 0
    assert page.locator("#timeline b, #result b, #timeline script, #result script").count() == 0

    assert text(page, "#timeline li.step-route .reason") == f"reason: {ROUTE_REASON}"
    refused, ran = page.locator("#timeline li.step-sql").nth(0), page.locator("#timeline li.step-sql").nth(1)
    assert refused.locator("pre.sql").inner_text() == REFUSED_SQL
    assert refused.locator(".reason").inner_text().startswith("not run: guard: ")
    assert ran.locator("pre.sql").first.inner_text() == NOTES_SQL
    assert "<script>window.__xss=''run''</script>" in ran.locator(".sql-result pre.sql").inner_text()
    assert ran.locator(".sql-result th").all_inner_texts() == ["id", "<b>note</b>"]
    assert ran.locator(".sql-result td").all_inner_texts() == ["1", CELL, "2", "plain text", "3", "NULL"]

    source = page.locator("#answer ul.sources > li")
    assert source.locator("th").all_inner_texts() == ["id", "<b>note</b>"]
    assert source.locator("td").all_inner_texts() == ["1", CELL, "2", "plain text", "3", "NULL"]
    assert "<script>window.__xss=''run''</script>" in source.locator("pre.sql").inner_text()
    assert text(page, "#answer .answer-text") == NOTES_ANSWER
    assert text(page, "#low-confidence") == f"Low confidence, flagged by the grounding critic: {XSS_REASON}."
    assert page.locator("#timeline li.step-critique .reason").all_inner_texts() == [f"reason: {XSS_REASON}"] * 2
    page.locator("#low-confidence").scroll_into_view_if_needed()
    assert page.evaluate("window.__xss") is None  # still, after everything was rendered and laid out
    screenshot(page, shots, "serve-data-untrusted.png")


def test_the_keep_button_keeps_the_statement_that_ran_as_a_labelled_example(page, ops, kept, url):
    """rag serve --keep-sql FILE: the SQL step offers to keep its statement; the server runs it again through the
    guard and appends the question, the statement (without the LIMIT the guard added) and its rows to FILE, as rag
    ask --keep-sql does; the same question again is refused, and so is a statement the guard refuses."""
    import json

    from rag.eval.golden import load_golden

    _, counts = ops
    ask(page, COUNT)
    page.locator("#trace summary").click()  # the trace folds away when the answer is done
    step = page.locator("#timeline li.step-sql")
    step.locator("button.keep-sql").click()
    page.wait_for_function("document.querySelector('.keep-status').textContent.includes('kept as')")
    assert str(kept) in text(page, ".keep-status") and step.locator("button.keep-sql").is_disabled()
    [item] = load_golden(kept)  # a golden file rag eval and sql_examples read
    assert (item.question, item.split, item.meta["route"]) == (COUNT, "train", "data")
    assert item.meta["gold_sql"] == OPEN_CLAIMS.replace("count(*)", "COUNT(*)")  # as the guard writes it, no LIMIT
    assert item.meta["gold_result"] == [[counts["open"]]] and str(counts["open"]) in item.reference_answer

    before = kept.read_bytes()
    again = httpx.post(url + "/api/keep", json={"question": COUNT, "sql": OPEN_CLAIMS}, timeout=60)
    assert again.status_code == 400 and "already holds this question" in again.json()["error"]
    hostile = httpx.post(url + "/api/keep", json={"question": "Drop them", "sql": "DROP TABLE claims"}, timeout=60)
    assert hostile.status_code == 400 and "DROP is not allowed" in hostile.json()["error"]  # the guard's reason
    missing = httpx.post(url + "/api/keep", json={"question": "No statement"}, timeout=60)
    assert missing.status_code == 400 and missing.json()["error"] == "sql: required, a non-empty string"
    broken = httpx.post(url + "/api/keep", content=b'{"question": "Open \\ud800 claims?", "sql": "SELECT 1"}',
                        headers={"content-type": "application/json"}, timeout=60)
    assert broken.status_code == 400 and broken.json()["error"].startswith("question: character 6 is U+D800")
    assert kept.read_bytes() == before and json.loads(before)["id"] == item.id  # nothing else written

