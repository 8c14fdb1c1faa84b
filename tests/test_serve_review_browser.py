"""The Review tab of rag serve --review FILE in real headless Chromium (as tests/test_serve_browser.py drives the
page, on a strict page: any JavaScript error, console error or HTTP error fails it): two items reviewed by keyboard
(a accepts, e opens the edit, Ctrl+Enter saves it), a third skipped with s, each decision in the file at once, the
counts and the filter "not reviewed by a human" following; the question, reference answer, model reason and seed
passage carry <img onerror> and <script>, and are shown as text. A decision on a file changed meanwhile is refused
with the server's message and a Reload button. No model is called.

With UPDATE_DOCS_SCREENSHOTS=1 its screenshot replaces docs/serve-review.png."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from rag.curate.review import write_records
from rag.serve.app import create_app
from rag.serve.evalview import RunBrowser
from rag.serve.goldenview import GoldenReview
from rag.serve.server import Background
from tests.browser_support import axe_check, browser, needs_chromium, open_page, shots  # noqa: F401
from tests.browser_support import screenshot as _screenshot
from tests.serve_support import (  # noqa: F401
    FIXTURE_RUNS,
    PASS_ID,
    ROOT,
    TRICKY_ID,
    WITH_ID,
    gate,
    scripted_lms,
    scripted_programs,
    serve_index,
)

pytestmark = needs_chromium

MODEL = "groq/qwen/qwen3-32b"
XSS_QUESTION = "Swallows <img src=x onerror=\"window.__xss = 'question'\"> and onerror?"
XSS_REFERENCE = '<script>window.__xss = "reference"</script> Not recorded.'
XSS_REASON = 'the seed says <b>"not recorded"</b> <img src=x onerror="window.__xss = \'reason\'">'
EDITED = "What does the document say about the airspeed of swallows?"
KEEP_D4 = "Loosely worded, as a vague question is; the seed passage says that pass does nothing."


def items(index_dir):
    draft = {"index": str(index_dir), "n": 4, "seed": 0}
    return [
        {"id": "d1", "type": "answerable", "question": "What does the with statement call after the block?",
         "reference_answer": "__exit__.", "relevant_chunk_ids": [WITH_ID], "seed_chunk_id": WITH_ID, "split": "test",
         "drafted_by": "drafter", "draft": draft},
        {"id": "d2", "type": "answerable", "question": XSS_QUESTION, "reference_answer": XSS_REFERENCE,
         "relevant_chunk_ids": [TRICKY_ID], "seed_chunk_id": TRICKY_ID, "split": "test", "drafted_by": "drafter",
         "draft": draft, "review": "accept", "reviewed_by": MODEL, "review_reason": XSS_REASON,
         "auto_review": {"review": "accept", "reviewed_by": MODEL, "reason": XSS_REASON}},
        {"id": "d3", "type": "unanswerable", "question": "Who wrote the with statement?", "reference_answer": "",
         "should_refuse": True, "relevant_chunk_ids": [], "seed_chunk_id": WITH_ID, "split": "dev", "draft": draft,
         "review": "reject", "reviewed_by": "human"},
        {"id": "d4", "type": "vague", "question": "the statement that does nothing", "reference_answer": "pass.",
         "relevant_chunk_ids": [PASS_ID], "seed_chunk_id": PASS_ID, "split": "dev", "drafted_by": "drafter",
         "draft": draft, "review": "accept", "reviewed_by": MODEL, "review_reason": KEEP_D4,
         "auto_review": {"review": "accept", "reviewed_by": MODEL, "reason": KEEP_D4}},
    ]


def rows(path):
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


@pytest.fixture
def served(tmp_path, tmp_path_factory, gate):
    index = serve_index(tmp_path_factory)
    path = tmp_path / "drafted.jsonl"
    write_records(path, items(index.dir))
    browser_ = RunBrowser(FIXTURE_RUNS, golden_dir=ROOT / "golden", artifacts_dir=ROOT / "artifacts")
    app = create_app(scripted_programs(index, scripted_lms(gate)), browser_, examples=[], review=GoldenReview(path))
    with Background(app) as url:
        yield url, path


def heading(page, item_id):
    page.wait_for_function(f"document.querySelector('#review-item-heading').textContent.startsWith('Item {item_id} ')")


def test_two_items_reviewed_by_keyboard_are_written_to_the_file_and_untrusted_text_stays_text(browser, served, shots):
    url, path = served
    with open_page(browser, url, strict=True) as page:
        page.click("#tab-review")
        heading(page, "d1")
        assert page.locator("#review-file").inner_text() == "drafted.jsonl"
        assert page.locator("#review-count-human").inner_text() == "3 left for a human"
        assert page.locator("#review-items li").count() == 3  # the filter is on: d3 has a human decision
        assert page.locator("#review-accept kbd").inner_text() == "a" and page.locator("#review-skip kbd").inner_text() == "s"
        assert "What does the with statement call after the block?" in page.locator("#review-question").inner_text()
        assert "The with statement is used to wrap" in page.locator("#review-passages").inner_text()
        axe_check(page, "the review tab")

        page.keyboard.press("a")  # accept d1; the next item without a human decision is d2
        heading(page, "d2")
        assert "d1: accepted, written to drafted.jsonl." in page.locator("#review-status").inner_text()
        assert rows(path)["d1"]["review"] == "accept" and rows(path)["d1"]["reviewed_by"] == "human"
        # the untrusted texts, as text: the question, the reference answer, the model's reason, the seed passage
        assert page.locator("#review-question").inner_text() == XSS_QUESTION
        assert page.locator("#review-reference").inner_text() == XSS_REFERENCE
        proposal = page.locator("#review-proposal").inner_text()
        assert f"The model proposes keep ({MODEL})" in proposal and XSS_REASON in proposal
        passages = page.locator("#review-passages").inner_text()
        assert '<img src=x onerror="window.__xss = \'img\'">' in passages and "seed" in passages
        assert XSS_QUESTION in page.locator("#review-items").inner_text()
        assert page.locator("#view-review img, #view-review script").count() == 0
        assert page.locator("#review-question *, #review-reference *, #review-proposal .reason *").count() == 0
        assert page.evaluate("window.__xss") is None

        page.keyboard.press("e")  # edit d2: the form opens with the question in focus
        page.wait_for_selector("#review-edit-form:not([hidden])")
        axe_check(page, "the review tab's edit form")
        assert page.evaluate("document.activeElement.id") == "review-edit-question"
        assert page.input_value("#review-edit-reference") == XSS_REFERENCE
        page.keyboard.press("Control+A")
        page.keyboard.type(EDITED)
        page.keyboard.press("Control+Enter")
        heading(page, "d4")  # d3 has a human decision: passed over
        assert f"The model proposes keep ({MODEL})" in page.locator("#review-proposal").inner_text()
        assert "d2: edited, written to drafted.jsonl." in page.locator("#review-status").inner_text()
        d2 = rows(path)["d2"]
        assert (d2["question"], d2["review"], d2["reviewed_by"]) == (EDITED, "edit", "human")
        assert d2["edited_from"] == {"question": XSS_QUESTION, "reference_answer": XSS_REFERENCE}
        assert d2["reference_answer"] == XSS_REFERENCE and "review_reason" not in d2 and d2["auto_review"]["review"] == "accept"
        assert page.locator("#review-count-human").inner_text() == "1 left for a human"
        _screenshot_for_docs(page, shots)

        page.keyboard.press("s")  # skip d4: nothing is written, and nothing else is left
        page.wait_for_selector("#review-item", state="hidden")
        assert "d4: skipped (nothing written). Nothing left but the 1 item(s) you skipped" in \
            page.locator("#review-status").inner_text()
        d3 = rows(path)["d3"]
        assert rows(path)["d4"]["reviewed_by"] == MODEL and d3 == items(d3["draft"]["index"])[2]  # untouched
        assert page.locator("#review-items li").all_inner_texts()[0].startswith("d4")
        page.uncheck("#review-filter")  # every item, with who decided it
        entries = page.locator("#review-items li").all_inner_texts()
        assert len(entries) == 4 and "accept · human" in entries[0] and "edit · human" in entries[1]
        assert "reject · human" in entries[2] and f"accept · {MODEL}" in entries[3]
        assert page.evaluate("window.__xss") is None


def _screenshot_for_docs(page, shots):
    path = _screenshot(page, shots, "serve-review.png")
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":
        shutil.copyfile(path, ROOT / "docs" / "serve-review.png")


def test_a_decision_on_a_file_changed_meanwhile_is_refused_and_the_page_offers_to_reload(browser, served):
    url, path = served
    with open_page(browser, url) as page:  # not strict: the 409 is the point
        page.click("#tab-review")
        heading(page, "d1")
        changed = rows(path)
        changed["d1"].update(review="reject", reviewed_by="human")  # another reviewer, meanwhile
        write_records(path, list(changed.values()))
        before = path.read_bytes()
        page.click("#review-accept")
        page.wait_for_selector("#review-error:not([hidden])")
        assert "drafted.jsonl changed on disk since this item was shown" in page.locator("#review-error").inner_text()
        assert path.read_bytes() == before
        page.click("#review-reload")
        page.wait_for_selector("#review-error", state="hidden")
        page.wait_for_function("document.querySelector('#review-state').textContent.startsWith('reject · human')")
        heading(page, "d1")  # the item shown stays, with the other reviewer's decision
        page.click("#review-accept")
        heading(page, "d2")
        assert rows(path)["d1"]["review"] == "accept"
