"""The rag serve page in real headless Chromium (Debian's chromium, driven by Playwright): the trace appears step by
step, a citation opens its passage in a dialog (Escape and its close button close it; its text is shown without
reST/Markdown decoration), an unanswerable question is refused with its closest passages, the answer lists the
passages read but not cited apart, the program's notes are folded away, the evaluation browser shows the fixture
runs' metrics, a phone gets one column no wider than its screen, dark mode and light mode keep text readable,
untrusted document and model text never runs as script, Stop (or a new question) cancels the question on the server
so the next one runs at once, a waiting question says how many are ahead, loading the model is said with its own
time and not charged to the first step, the answer is scrolled into view with a Copy button, a follow-up is sent
with the conversation kept in the browser (shown above it, kept over a reload, cleared by New conversation), and the
answer's text appears as the model writes it, as plain text, until the final answer with its links replaces it.

Screenshots go to a temporary folder; with UPDATE_DOCS_SCREENSHOTS=1 they replace the ones in docs/ (README)."""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from pathlib import Path

import pytest

from rag.agent.module import REFUSAL
from tests.browser_support import (  # noqa: F401
    TIMEOUT_MS,
    browser,
    completed_nodes,
    contrasts,
    needs_chromium,
    open_page,
    shots,
)
from tests.browser_support import screenshot as _screenshot
from tests.serve_support import (  # noqa: F401
    ANSWERABLE,
    FOLLOW_UP,
    PASS_ID,
    ROOT,
    SLOW,
    STANDALONE,
    STREAMED,
    STREAMED_ANSWER,
    TRICKY_ID,
    UNANSWERABLE,
    WITH_ID,
    XSS,
    LoadingLM,
    SlowLoad,
    gate,
    scripted_lms,
    serve,
    serve_index,
    server_runner,
    settle,
    warm_serve,
)
from tests.test_serve_api import ALSO, with_uncited

pytestmark = needs_chromium

PHONE = {"width": 390, "height": 844}
# A passage as reST and Markdown write it: title over- and underlines, emphasis, literals; and untrusted markup.
MARKED_UP = """=====================
The *with* statement
=====================

The **with** statement calls ``__enter__()`` and `__exit__()`.
It takes *args and **kwargs; 2 * 3 is 6, and ("," item)* repeats.

Context managers
----------------

<b>bold?</b> <img src=x onerror="window.__xss = 'passage'">
"""


@pytest.fixture(scope="module")
def stream_gate():
    """STREAMED's answerer stops halfway through its answer until this is set; open unless a test closes it."""
    event = threading.Event()
    event.set()
    return event


@pytest.fixture(scope="module")
def server(tmp_path_factory, gate, stream_gate):
    with warm_serve(serve_index(tmp_path_factory), gate, with_uncited(scripted_lms(gate, stream_gate))) as base:
        yield base


@pytest.fixture
def url(server):
    yield server
    settle(server)


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
    page.wait_for_selector("#passage[open]")
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
    """The indexed document's title and text, the grader's reason and the answer carry <script> and <img onerror>:
    the answer (plain text, its citations the only elements in it), the source card's title, preview and whole text,
    the passage dialog and the trace show them as text."""
    page.fill("#question", XSS)
    page.click("#ask-btn")
    page.wait_for_selector("#answer")
    assert page.locator("#answer .answer-text *:not(.cite):not(button.chunk)").count() == 0
    card = page.locator(f"#answer li.source-card[data-chunk='{TRICKY_ID}']")
    preview = card.locator(".card-preview").inner_text()
    assert '<img src=x onerror="window.__xss = \'img\'">' in preview and '<script>window.__xss = "text"</script>' in preview
    assert card.locator(".card-title").inner_text() == 'Swallows <script>window.__xss = "title"</script>'
    card.locator("button.card-toggle").click()
    whole = card.locator(".card-text").inner_text()
    assert '<img src=x onerror="window.__xss = \'img\'">' in whole and '<script>window.__xss = "text"</script>' in whole
    assert '<script>window.__xss = "title"</script>' in card.locator(".card-text .passage-heading").inner_text()
    assert card.locator(".card-text *:not(.passage-heading)").count() == 0 and page.evaluate("window.__xss") is None
    page.click(f"#answer .answer-text button.chunk[data-chunk='{TRICKY_ID}']")
    page.wait_for_function("document.querySelector('#passage-text').textContent.includes('onerror')")
    assert page.evaluate("window.__xss") is None
    assert page.evaluate("document.querySelectorAll('script').length") == 1  # main.js only
    assert page.locator("main img, dialog img").count() == 0 and page.locator("#timeline b").count() == 0
    assert '<img src=x onerror="window.__xss = \'answer\'">' in page.locator("#answer .answer-text").inner_text()
    assert '<script>window.__xss = "title"</script>' in page.locator("#passage-title").inner_text()
    assert '<img src=x onerror="window.__xss = \'img\'">' in page.locator("#passage-text").inner_text()
    assert '<b>"onerror"</b>' in page.locator("#timeline li.step-grade .reason").inner_text()
    assert '<script>window.__xss = "title"</script>' in page.locator("#timeline li.step-retrieve table.hits").inner_text()


def ask(page, question: str, done: str = "#answer") -> None:
    page.fill("#question", question)
    page.click("#ask-btn")
    page.wait_for_selector(done)


def box(page, selector: str) -> dict:
    return page.locator(selector).first.bounding_box()


def test_the_passage_is_a_dialog_that_escape_and_its_close_button_close(browser, url):
    with open_page(browser, url, strict=True) as page:
        ask(page, ANSWERABLE)
        link = page.locator(f"#answer .answer-text button.chunk[data-chunk='{WITH_ID}']")
        link.click()
        page.wait_for_selector("#passage[open]")
        page.wait_for_function("document.querySelector('#passage-where').textContent.includes('part 1 of 3')")
        dialog = page.get_by_role("dialog", name=page.locator("#passage-title").inner_text(), exact=True)
        assert dialog.is_visible() and page.evaluate("document.querySelector('#passage').matches(':modal')")
        assert page.evaluate("document.activeElement.id") == "passage-close"  # focus moved into the dialog
        page.keyboard.press("Escape")
        page.wait_for_selector("#passage:not([open])", state="attached")
        assert not dialog.is_visible() and page.locator("#answer").is_visible()
        assert page.evaluate("document.activeElement.dataset.chunk") == WITH_ID  # focus back on the link that opened it
        page.keyboard.press("Enter")  # the keyboard opens it again, and the close button closes it
        page.wait_for_selector("#passage[open]")
        page.click("#passage-close")
        page.wait_for_selector("#passage:not([open])", state="attached")
        assert page.evaluate("document.activeElement.dataset.chunk") == WITH_ID


def test_the_passage_text_is_shown_without_rest_or_markdown_decoration(browser, url):
    """The passage's text as the index might hold it (reST and Markdown): decoration lines are dropped (the line they
    underline becomes a heading), emphasis and literal markers are taken off, stars that are not markup stay, and the
    untrusted markup in it is still text."""
    def marked_up(route):
        response = route.fetch()
        route.fulfill(response=response, json={**response.json(), "text": MARKED_UP})

    with open_page(browser, url, strict=True) as page:
        page.route("**/api/chunk?*", marked_up)
        ask(page, ANSWERABLE)
        page.click(f"#answer .answer-text button.chunk[data-chunk='{WITH_ID}']")
        page.wait_for_function("document.querySelector('#passage-text').textContent.includes('Context managers')")
        text = page.locator("#passage-text").inner_text()
        assert page.locator("#passage-text .passage-heading").all_inner_texts() == ["The with statement", "Context managers"]
        assert "The with statement calls __enter__() and __exit__()." in text
        assert 'It takes *args and **kwargs; 2 * 3 is 6, and ("," item)* repeats.' in text  # not markup: kept
        for noise in ("===", "---", "``", "**with**", "*with*", "`__exit__"):
            assert noise not in text
        assert '<b>bold?</b> <img src=x onerror="window.__xss = \'passage\'">' in text
        assert page.locator("#passage b, #passage img").count() == 0 and page.evaluate("window.__xss") is None


def test_the_answer_lists_its_sources_and_apart_the_passages_read_but_not_cited(browser, url):
    with open_page(browser, url, strict=True) as page:
        ask(page, ALSO)
        ids = "els => els.map(e => e.dataset.chunk)"
        assert page.eval_on_selector_all("#answer ul.sources button.chunk", ids) == [PASS_ID]
        uncited = page.eval_on_selector_all("#answer ul.uncited button.chunk", ids)
        assert WITH_ID in uncited and PASS_ID not in uncited  # all the answerer read, less what it cites
        assert uncited == page.eval_on_selector_all("#timeline li.step-answer div:last-child button.chunk", ids)
        assert page.locator("#answer h3").all_inner_texts() == ["Sources", "Also read (not cited)"]
        assert f"{WITH_ID} Compound statements" in page.locator("#answer ul.uncited").inner_text()  # with its title
        page.click(f"#answer ul.uncited button.chunk[data-chunk='{WITH_ID}']")  # it opens like a cited one
        page.wait_for_function("document.querySelector('#passage-text').textContent.includes('context manager')")


def test_done_gives_the_wall_time_with_the_agent_time_beside_it_and_the_notes_are_folded_away(browser, url):
    with open_page(browser, url, strict=True) as page:
        ask(page, ANSWERABLE)
        page.wait_for_function("document.querySelector('#progress').textContent.startsWith('Done in')")
        done = page.locator("#progress").inner_text()
        wall, agent = map(float, re.fullmatch(r"Done in ([\d.]+) s \(agent ([\d.]+) s\)", done).groups())
        assert wall >= agent
        # a neutral colour, the text's own, not the warning orange
        assert page.evaluate("getComputedStyle(document.querySelector('#progress')).color") == \
            page.evaluate("getComputedStyle(document.body).color")
        # the program's messages (which artifact was skipped and why): one collapsed line below the answer
        notes = page.locator("#notes details.notes")
        assert notes.locator("summary").inner_text() == "Notes (1)" and not notes.evaluate("d => d.open")
        assert not page.get_by_text("scripted test program").is_visible()
        assert "scripted test program" not in page.locator("#program").inner_text()
        assert box(page, "#notes")["y"] > box(page, "#answer")["y"]
        notes.locator("summary").click()
        assert page.get_by_text("scripted test program (DummyLM per role)").is_visible()


FOLLOWS = "([a, b]) => !!(document.querySelector(a).compareDocumentPosition(document.querySelector(b)) & Node.DOCUMENT_POSITION_FOLLOWING)"


def test_once_done_the_answer_comes_first_and_the_trace_below_it_folded(browser, url, gate):
    """While the question runs the trace is open and the answer's place is below it; once done, the answer (with its
    notes) is moved above the trace, which is folded into a closed details with the steps' count and time; a click
    opens it on the steps. On a phone the answer's top is above the trace's top too."""
    with open_page(browser, url, strict=True) as page:
        gate.clear()
        try:
            page.fill("#question", SLOW)
            page.click("#ask-btn")
            page.wait_for_selector("#timeline li.step-grade.pending")
            assert page.locator("#trace").evaluate("d => d.open") and page.evaluate(FOLLOWS, ["#trace", "#result"])
        finally:
            gate.set()
        page.wait_for_selector("#answer")
        assert page.evaluate(FOLLOWS, ["#answer", "#trace"]) and page.evaluate(FOLLOWS, ["#notes", "#trace"])
        trace = page.locator("#trace")
        assert not trace.evaluate("d => d.open") and page.locator("#timeline li.step-retrieve").is_hidden()
        summary = trace.locator("summary").inner_text()
        assert re.fullmatch(r"How this answer was found: 3 steps, [\d.]+ s", summary), summary
        trace.locator("summary").click()
        assert trace.evaluate("d => d.open") and page.locator("#timeline li.step-retrieve table.hits").is_visible()
        assert box(page, "#answer")["y"] < box(page, "#timeline li.step-retrieve")["y"]
        ask(page, UNANSWERABLE, done="#refusal")  # a new question folds it again, the refusal first
        assert not trace.evaluate("d => d.open") and page.evaluate(FOLLOWS, ["#refusal", "#trace"])
        assert trace.locator("summary").inner_text().startswith("How this refusal was found: ")
    with open_page(browser, url, strict=True, viewport=PHONE) as page:
        ask(page, ALSO)
        assert box(page, "#answer")["y"] < box(page, "#trace")["y"]
        assert page.locator("#answer").is_visible() and not page.locator("#trace").evaluate("d => d.open")


def test_a_phone_gets_one_column_no_wider_than_its_screen(browser, url, shots):
    width = "document.scrollingElement.scrollWidth"
    with open_page(browser, url, strict=True, viewport=PHONE) as page:
        ask(page, ALSO)
        assert page.evaluate(width) <= PHONE["width"]
        left, right = box(page, ".panel.left"), box(page, ".panel.right")
        assert right["width"] >= 350 and left["y"] + left["height"] <= right["y"]  # one column: the form, then the answer
        for selector in ("#config", "#artifact", "#ask-btn", "#question", ".panel.right", "#answer", "#trace"):
            b = box(page, selector)
            assert b["x"] >= 0 and b["x"] + b["width"] <= PHONE["width"], (selector, b)
        _screenshot(page, shots, "serve-phone.png")
        page.click(f"#answer ul.sources button.chunk[data-chunk='{PASS_ID}']")
        page.wait_for_selector("#passage[open]")
        b = box(page, "#passage")
        assert b["x"] >= 0 and b["x"] + b["width"] <= PHONE["width"]
        page.keyboard.press("Escape")

        page.click("#tab-evals")
        page.wait_for_selector("#metric-table tbody tr")
        page.click("#runs-table button.link:text('baseline')")
        page.wait_for_selector("#run-view details.failure")
        page.locator("#run-view details.failure").first.locator("summary").click()
        assert page.evaluate(width) <= PHONE["width"]
        # the tables scroll inside their own box; none reaches past the screen
        tables = page.eval_on_selector_all(".table-scroll", "els => els.filter(e => e.offsetParent !== null)"
                                           ".map(e => e.getBoundingClientRect().right)")
        assert len(tables) >= 5 and max(tables) <= PHONE["width"]
        assert page.eval_on_selector_all("#view-evals th", "els => els.filter(e => !e.textContent.trim()).length") == 0


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_is_readable_in_light_and_dark_mode(browser, url, scheme):
    """prefers-color-scheme picks the colours; every piece of text on the answer page, the grey settings and notes
    included, reaches 4.5:1 (WCAG AA) against the background it sits on."""
    with open_page(browser, url, strict=True, color_scheme=scheme) as page:
        ask(page, ALSO)
        page.locator("#notes summary").click()
        page.locator("#trace summary").click()  # the folded trace's text too
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        level = sum(int(v) for v in re.findall(r"\d+", background)[:3]) / 3
        assert (level < 40) if scheme == "dark" else (level > 200), background
        panel = page.evaluate("getComputedStyle(document.querySelector('.panel')).backgroundColor")
        assert panel != background
        own_text = "header *, #view-ask *"  # the elements with text of their own (not only their children's)
        ratios = contrasts(page, own_text)
        assert len(ratios) > 40 and any(".muted" in k or "config-info" in k for k in ratios)
        low = {k: round(v, 2) for k, v in ratios.items() if v < 4.5}
        assert not low, f"text below 4.5:1 in {scheme} mode: {low}"


def wait_until(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def progress_starts(page, text: str) -> None:
    page.wait_for_function(f"document.querySelector('#progress').textContent.startsWith({text!r})")


def test_stop_cancels_the_question_on_the_server_and_the_next_one_runs_at_once(browser, url, gate):
    """SLOW's grader waits on the gate. Another page's question waits behind it and says so; Stop aborts the request,
    the page says Stopped, the server drops the question (the log says cancelled) and gives its slot to the waiting
    question, which is answered while the stopped one's grader call is still under way. A new question asked over a
    running one cancels it the same way."""
    runner = server_runner(url)
    gate.clear()
    try:
        with open_page(browser, url, strict=True) as page, open_page(browser, url, strict=True) as other:
            assert page.locator("#stop-btn").is_hidden()
            page.fill("#question", SLOW)
            page.click("#ask-btn")
            page.wait_for_selector("#timeline li.step-grade.pending")
            assert page.locator("#stop-btn").is_visible()
            other.fill("#question", ANSWERABLE)
            other.click("#ask-btn")
            progress_starts(other, "Queued: 1 ahead")
            page.click("#stop-btn")
            progress_starts(page, "Stopped after")
            assert page.locator("#stop-btn").is_hidden() and page.locator("#timeline li.step-grade.stopped").count() == 1
            other.wait_for_selector("#answer", timeout=20_000)  # the stopped question's grader still waits on the gate
            assert not gate.is_set()
            # the same page, a question over a running one: the old one is dropped, the new one answered at once
            page.fill("#question", SLOW)
            page.click("#ask-btn")
            page.wait_for_selector("#timeline li.step-grade.pending")
            ask(page, ANSWERABLE)
            assert page.locator("#answer").is_visible() and not gate.is_set()
            assert page.locator("#progress").inner_text().startswith("Done in")
            assert [t["question"] for t in stored_turns(page)] == [ANSWERABLE]  # a stopped question is no turn
            wait_until(lambda: runner.pending() == 2)  # the two stopped questions' grader calls, still under way
    finally:
        gate.set()
    wait_until(lambda: runner.pending() == 0)
    stopped = [e for e in runner.log if e["question"] == SLOW][-2:]
    assert [(e["state"], e["while"], e["steps"], e["stopped_before"]) for e in stopped] == \
        [("cancelled", "running", ["retrieve", "grade"], "answer")] * 2


def test_the_answer_is_brought_into_view_and_copy_puts_its_text_on_the_clipboard(browser, url):
    """On a phone the answer comes below the form and the trace: the page scrolls it into view. Its Copy button puts
    the answer's text, citations included, on the clipboard."""
    in_view = ("(() => { const r = document.querySelector('#answer h2').getBoundingClientRect();"
               " return r.top >= 0 && r.bottom <= innerHeight; })()")
    with open_page(browser, url, strict=True, viewport=PHONE, permissions=["clipboard-read", "clipboard-write"]) as page:
        ask(page, ALSO)
        assert page.evaluate("scrollY") > 0 and page.evaluate(in_view)
        copy = page.locator("#answer button.copy")
        assert copy.inner_text() == "Copy" and copy.is_visible()
        copy.click()
        page.wait_for_function("document.querySelector('#answer button.copy').textContent === 'Copied'")
        assert page.evaluate("navigator.clipboard.readText()") == f"pass does nothing [{PASS_ID}]."
        assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]


LOAD_S = 3.0


def test_loading_the_model_is_said_with_its_time_and_not_charged_to_the_first_step(browser, server, tmp_path_factory,
                                                                                   gate):
    """A server whose grader's model takes LOAD_S to load (lazily, in its first call, as the embedded engine does): the
    page says "Loading the model" while it loads, lists the time after the models, and the grade step shows only its
    own time."""
    lms = scripted_lms(gate)
    lms["grader"] = LoadingLM(lms["grader"].answers, SlowLoad(LOAD_S))
    with serve(serve_index(tmp_path_factory), gate, lms=lms) as base, open_page(browser, base, strict=True) as page:
        page.fill("#question", ANSWERABLE)
        page.click("#ask-btn")
        progress_starts(page, "Loading the model dummy…")
        page.wait_for_selector("#answer")
        loaded = page.locator("#loaded").inner_text()
        assert float(re.search(r"\bmodel ([\d.]+) s", loaded).group(1)) >= LOAD_S * 0.95, loaded
        grade = page.locator("#timeline li.step-grade .meta").inner_text()
        assert float(re.search(r"([\d,]+) ms", grade).group(1).replace(",", "")) < LOAD_S * 1000 / 2, grade


def stored_turns(page) -> list[dict]:
    return page.evaluate("JSON.parse(sessionStorage.getItem('sieve.conversation') || '[]')")


def turn_texts(page, part: str) -> list[str]:
    return page.locator(f"#conversation li.turn .turn-{part}").all_inner_texts()


def test_a_follow_up_is_asked_with_the_conversation_that_a_reload_keeps_and_new_conversation_clears(browser, url):
    """The page keeps the conversation (in sessionStorage) and sends its last turns with the next question: the
    follow-up's trace shows the condense step (the scripted condenser's standalone question, which is what was
    searched), the earlier turn is shown above it, a reload keeps both turns, New conversation empties it so the next
    question has no condense step, and a refused question is a turn too."""
    with open_page(browser, url, strict=True) as page:
        sent = []
        page.on("request", lambda r: sent.append(r.post_data_json) if r.url.endswith("/api/stream") else None)
        assert page.locator("#follow-up").is_hidden() and page.locator("#conversation").is_hidden()
        ask(page, ANSWERABLE)
        assert completed_nodes(page) == ["retrieve", "grade", "answer"] and sent[-1]["history"] == []
        assert page.locator("#follow-up-note").inner_text() == "Follow-up: asked with the last turn"
        assert page.locator("#conversation").is_hidden()  # the one turn is the answer on the page

        page.fill("#question", FOLLOW_UP)
        page.click("#ask-btn")
        page.wait_for_selector("#timeline li.step-condense:not(.pending)", state="attached")  # folded once done
        page.wait_for_selector("#answer")
        assert sent[-1]["question"] == FOLLOW_UP and [t["question"] for t in sent[-1]["history"]] == [ANSWERABLE]
        assert f"[{WITH_ID}]" in sent[-1]["history"][0]["answer"]
        assert completed_nodes(page) == ["condense", "retrieve", "grade", "answer"]
        condense = page.locator("#timeline li.step-condense")
        assert condense.locator("q").all_inner_texts() == [FOLLOW_UP, STANDALONE]
        assert f"{FOLLOW_UP} → {STANDALONE}" in condense.inner_text()
        assert page.locator("#timeline li.step-retrieve q").first.inner_text() == STANDALONE  # what was searched
        assert "null operation" in page.locator("#answer .answer-text").inner_text()
        # cited in the cited-ids field only: linked after the text all the same
        assert page.locator("#answer .answer-text .cite-end button.chunk").all_inner_texts() == [PASS_ID]
        # the earlier turn, compact, above the follow-up and its trace
        assert turn_texts(page, "question") == [ANSWERABLE] and "context manager" in turn_texts(page, "answer")[0]
        assert page.locator("#conversation li.step").count() == 0
        assert page.locator("#asked").inner_text() == f"Follow-up: {FOLLOW_UP}"
        assert box(page, "#conversation")["y"] < box(page, "#asked")["y"] < box(page, "#answer")["y"] < box(page, "#trace")["y"]
        low = {k: round(v, 2) for k, v in contrasts(page, "#conversation *, #asked *, #follow-up *").items() if v < 4.5}
        assert not low, low

        page.reload()
        page.wait_for_selector("body[data-ready='1']")
        assert turn_texts(page, "question") == [ANSWERABLE, FOLLOW_UP]
        assert page.locator("#follow-up-note").inner_text() == "Follow-up: asked with the last 2 turns"
        assert page.locator("#answer").count() == 0

        page.click("#new-conversation")
        assert page.locator("#conversation").is_hidden() and page.locator("#follow-up").is_hidden()
        assert stored_turns(page) == [] and page.evaluate("document.activeElement.id") == "question"
        ask(page, UNANSWERABLE, done="#refusal")
        assert sent[-1]["history"] == [] and completed_nodes(page)[0] == "retrieve"
        assert "condense" not in completed_nodes(page) and page.locator("#conversation").is_hidden()
        assert stored_turns(page) == [{"question": UNANSWERABLE, "answer": REFUSAL, "refused": True}]
        page.reload()
        page.wait_for_selector("body[data-ready='1']")
        assert page.locator("#conversation li.turn.refused .turn-answer").inner_text() == REFUSAL


def test_a_step_of_a_node_the_page_does_not_know_still_renders(browser, url):
    """A newer server's node: its head and its common fields, as text; the steps around it as usual."""
    with open_page(browser, url, strict=True) as page:
        html = page.evaluate("""async () => {
          const { renderStep } = await import('/static/js/trace.js');
          const ol = document.createElement('ol');
          ol.append(renderStep({ node: 'ponder <b>x</b>', index: 0, query: '<i>q</i>', reason: 'why', latency_ms: 5 }),
                    renderStep({ index: 1 }),
                    renderStep({ node: 'condense', index: 2, query: 'and it?', rewrite: 'What is it?' }));
          document.querySelector('#timeline').append(...ol.children);
          return document.querySelector('#timeline').innerText;
        }""")
        assert "ponder <b>x</b>" in html.lower() and "query: <i>q</i>" in html and "reason: why" in html
        assert "and it? → What is it?" in html
        assert page.locator("#timeline b, #timeline i").count() == 0


def test_the_answer_appears_as_the_model_writes_it_and_the_final_answer_replaces_it(browser, url, stream_gate):
    """STREAMED's answerer writes a few characters at a time and stops halfway through its answer until the stream gate
    opens. Meanwhile the page shows the answer so far where the answer goes, as text whose first citation, complete,
    is already a link (the only element in it); the answer step and the progress line say the model is writing; then
    the final answer, both citations links, replaces it."""
    draft_text = "(document.querySelector('#answer-draft .answer-text') || {}).textContent || ''"
    with open_page(browser, url, strict=True) as page:
        stream_gate.clear()
        try:
            page.fill("#question", STREAMED)
            page.click("#ask-btn")
            page.wait_for_selector(f"#answer-draft .answer-text button.chunk[data-chunk='{WITH_ID}']")
            page.wait_for_function("document.querySelector('#progress').textContent.includes('answer: writing')")
            draft = page.evaluate(draft_text)
            assert STREAMED_ANSWER.startswith(draft) and len(draft) < len(STREAMED_ANSWER), draft
            assert page.locator("#answer").count() == 0 and page.locator("#answer-draft .answer-text button").count() == 1
            assert page.locator("#answer-draft .answer-text *:not(.cite):not(button)").count() == 0
            assert page.locator("#timeline li.step-answer.pending .spinner").inner_text() == "writing…"
            assert page.locator("#answer-draft").get_attribute("aria-busy") == "true"
        finally:
            stream_gate.set()
        page.wait_for_selector("#answer")
        assert page.locator("#answer-draft").count() == 0
        assert page.locator("#answer .answer-text").text_content() == STREAMED_ANSWER
        assert page.locator(f"#answer .answer-text button.chunk[data-chunk='{WITH_ID}']").count() == 2
        assert completed_nodes(page) == ["retrieve", "grade", "answer"]
