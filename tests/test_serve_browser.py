"""The rag serve page in real headless Chromium (Debian's chromium, driven by Playwright): the trace appears step by
step, a citation opens its passage, an unanswerable question is refused with its closest passages, the evaluation
browser shows the fixture runs' metrics, and untrusted document and model text never runs as script.

Screenshots go to a temporary folder; with UPDATE_DOCS_SCREENSHOTS=1 they replace the ones in docs/ (README)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest

from rag.agent.module import REFUSAL
from tests.browser_support import TIMEOUT_MS, browser, completed_nodes, needs_chromium, open_page, shots  # noqa: F401
from tests.browser_support import screenshot as _screenshot
from tests.serve_support import (  # noqa: F401
    ANSWERABLE,
    PASS_ID,
    ROOT,
    SLOW,
    TRICKY_ID,
    UNANSWERABLE,
    XSS,
    gate,
    serve,
    serve_index,
    server_runner,
)

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def server(tmp_path_factory, gate):
    with serve(serve_index(tmp_path_factory), gate) as base:
        # one question first: the first call through DSPy imports and warms up what every later one reuses
        assert httpx.post(base + "/api/ask", json={"question": ANSWERABLE}, timeout=600).status_code == 200
        yield base


@pytest.fixture
def url(server):
    yield server
    runner = server_runner(server)
    deadline = time.monotonic() + 120  # a question a failed test left running ends before the next test
    while runner.pending() and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.fixture
def page(browser, url):
    with open_page(browser, url) as pg:
        yield pg


def screenshot(page, shots: Path, name: str) -> None:
    path = _screenshot(page, shots, name)
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":
        shutil.copyfile(path, ROOT / "docs" / name)


def test_steps_appear_as_they_finish_and_a_citation_opens_its_passage(page, gate, shots):
    gate.clear()  # the grader of SLOW waits: the page must already show retrieve, and grade as running
    try:
        page.fill("#question", SLOW)
        page.click("#ask-btn")
        page.wait_for_selector("#timeline li.step-retrieve:not(.pending) table.hits")
        page.wait_for_selector("#timeline li.step-grade.pending")
        page.wait_for_function("document.querySelector('#progress').textContent.includes('grade: waiting for the model')")
        assert completed_nodes(page) == ["retrieve"] and page.locator("#answer").count() == 0
    finally:
        gate.set()
    page.wait_for_selector("#answer")
    assert completed_nodes(page) == ["retrieve", "grade", "answer"]
    assert page.locator("#timeline li.step-grade .badge.yes").inner_text() == "RELEVANT"
    assert "dummy" in page.locator("#timeline li.step-grade .meta").inner_text()
    assert "Using uncompiled signatures" in page.locator("#program").inner_text()
    page.click(f"#answer .answer-text button.chunk[data-chunk='{PASS_ID}']")
    page.wait_for_selector("#passage:not([hidden])")
    page.wait_for_function("document.querySelector('#passage-where').textContent.includes('part 3 of 3')")
    assert "pass is a null operation" in page.locator("#passage-text").inner_text()
    assert page.locator("#passage-title").inner_text() == "Compound statements > The pass statement"
    screenshot(page, shots, "serve-answer.png")


def test_an_unanswerable_question_is_refused_with_the_closest_passages(page, shots):
    page.click("#examples button.example[data-type='unanswerable']")
    page.wait_for_selector("#refusal")
    assert UNANSWERABLE == page.input_value("#question")
    assert REFUSAL in page.locator("#refusal").inner_text()
    assert page.locator("#refusal .closest li").count() >= 1
    assert completed_nodes(page) == ["retrieve", "grade", "rewrite"] * 2 + ["retrieve", "grade", "refuse"]
    assert "swallow airspeed velocity" in page.locator("#timeline li.step-rewrite").first.inner_text()
    page.locator("#refusal .closest button.chunk").first.click()
    page.wait_for_function("document.querySelector('#passage-text').textContent.length > 0")
    screenshot(page, shots, "serve-refused.png")


def test_the_evaluation_browser_shows_the_runs_and_their_metric_table(page, shots):
    page.click("#tab-evals")
    page.wait_for_selector("#metric-table tbody tr")
    header = page.eval_on_selector_all("#metric-table thead th", "els => els.map(e => e.textContent)")
    assert header == ["metric", "baseline", "full"]
    first = page.locator("#metric-table tbody tr").first.inner_text()
    assert first.startswith("End-to-end accuracy") and "87.5% [52.9%, 97.8%] n=8" in first
    assert "python_ref.jsonl (689cf3fb92d5)" in page.locator("#runs-table").inner_text()
    page.wait_for_function("[...document.querySelectorAll('#plots img')].every(i => i.complete && i.naturalWidth > 0)",
                           timeout=2 * TIMEOUT_MS)  # matplotlib draws three figures
    page.click("#runs-table button.link:text('baseline')")
    page.wait_for_selector("#run-view details.failure")
    assert "retrieval miss" in page.locator("#run-view details.failure summary").inner_text()
    assert any(h.startswith("smollm2-bootstrap") for h in page.locator("#artifacts .artifact h3").all_inner_texts())
    screenshot(page, shots, "serve-evals.png")


def test_untrusted_text_is_shown_as_text_and_never_runs(page):
    """The indexed document's title and text, the grader's reason and the answer carry <script> and <img onerror>."""
    page.fill("#question", XSS)
    page.click("#ask-btn")
    page.wait_for_selector("#answer")
    page.click(f"#answer .answer-text button.chunk[data-chunk='{TRICKY_ID}']")
    page.wait_for_function("document.querySelector('#passage-text').textContent.includes('onerror')")
    assert page.evaluate("window.__xss") is None
    assert page.evaluate("document.querySelectorAll('script').length") == 1  # main.js only
    assert page.locator("main img, aside img").count() == 0 and page.locator("#timeline b").count() == 0
    assert '<img src=x onerror="window.__xss = \'answer\'">' in page.locator("#answer .answer-text").inner_text()
    assert '<script>window.__xss = "title"</script>' in page.locator("#passage-title").inner_text()
    assert '<img src=x onerror="window.__xss = \'img\'">' in page.locator("#passage-text").inner_text()
    assert '<b>"onerror"</b>' in page.locator("#timeline li.step-grade .reason").inner_text()
    assert '<script>window.__xss = "title"</script>' in page.locator("#timeline li.step-retrieve table.hits").inner_text()
