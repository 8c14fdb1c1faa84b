"""The rag serve page as people use it, in real headless Chromium: the answer's passages are cards (id and title, a
preview without reST/Markdown decoration, the whole passage in the card on request, fetched when the answer did not
carry it), a phone shows the answer before the examples and nothing wider than its screen, a wide screen keeps the
examples below the form, the page works from the keyboard alone (Tab order, Enter asks, a citation opens its passage
and Escape brings focus back), and axe-core finds no serious or critical violation on the ask page (light and dark),
the evaluations tab and the open passage dialog. Scripted models only (tests/serve_support.py)."""

from __future__ import annotations

import pytest

from tests.browser_support import axe_check, browser, needs_chromium, open_page  # noqa: F401
from tests.serve_support import (  # noqa: F401
    ANSWERABLE,
    PASS_ID,
    UNANSWERABLE,
    WITH_ID,
    gate,
    scripted_lms,
    serve_index,
    settle,
    warm_serve,
)
from tests.test_serve_api import ALSO, with_uncited
from tests.test_serve_browser import MARKED_UP, ask, box

pytestmark = needs_chromium

PHONES = [{"width": 360, "height": 740}, {"width": 390, "height": 844}]
WIDE = {"width": 1360, "height": 900}
WITH_PREVIEW = "The with statement is used to wrap the execution of a block with methods defined by a context manager."


@pytest.fixture(scope="module")
def server(tmp_path_factory, gate):
    with warm_serve(serve_index(tmp_path_factory), gate, with_uncited(scripted_lms(gate))) as base:
        yield base


@pytest.fixture
def url(server):
    yield server
    settle(server)


def card(page, chunk_id: str):
    return page.locator(f"#answer li.source-card[data-chunk='{chunk_id}']")


# ---------------------------------------------------------------- source cards

def test_the_answer_s_passages_are_cards_with_a_preview_and_the_whole_passage_on_request(browser, url):
    """ALSO cites pass and read with too: each is a card with its id link and title, a one-line preview of its text
    (its headings left out: the title says them) and a button that shows the whole passage in the card and hides it."""
    with open_page(browser, url, strict=True) as page:
        ask(page, ALSO)
        sources = page.locator("#answer ul.sources > li.source-card")
        assert sources.count() == 1 and page.locator("#answer ul.uncited > li.source-card").count() >= 1
        cited = card(page, PASS_ID)
        assert cited.locator(".card-head button.chunk").inner_text() == PASS_ID
        assert cited.locator(".card-title").inner_text() == "Compound statements > The pass statement"
        assert cited.locator(".card-preview").inner_text() == ("pass is a null operation: when it is executed, nothing "
                                                               "happens. It is useful as a placeholder.")
        uncited = card(page, WITH_ID)
        assert uncited.locator(".card-preview").inner_text().startswith(WITH_PREVIEW)
        assert "#" not in uncited.locator(".card-preview").inner_text()  # the Markdown heading markers are gone

        toggle, text = uncited.locator("button.card-toggle"), uncited.locator(".card-text")
        assert toggle.get_attribute("aria-expanded") == "false" and text.is_hidden()
        assert toggle.get_attribute("aria-controls") == text.get_attribute("id")
        toggle.click()
        assert toggle.get_attribute("aria-expanded") == "true" and text.is_visible()
        whole = text.inner_text()
        assert "It calls __enter__ before the block and __exit__ after it" in whole and "##" not in whole
        assert text.locator(".passage-heading").all_inner_texts() == ["Compound statements", "The with statement"]
        toggle.click()
        assert toggle.get_attribute("aria-expanded") == "false" and text.is_hidden()
        # the card's id still opens the passage dialog
        uncited.locator("button.chunk").click()
        page.wait_for_function("document.querySelector('#passage-text').textContent.includes('context manager')")


def test_a_refusal_shows_its_closest_passages_as_cards(browser, url):
    with open_page(browser, url, strict=True) as page:
        ask(page, UNANSWERABLE, done="#refusal")
        cards = page.locator("#refusal ul.closest > li.source-card")
        assert cards.count() >= 1 and all(p.strip() for p in cards.locator(".card-preview").all_inner_texts())


def test_the_preview_is_cut_at_a_word_and_the_card_fetches_a_text_the_answer_did_not_carry(browser, url):
    """The preview: the decoration of a reST/Markdown passage taken out (passage.js's own stripping), about 200
    characters cut at a word with an ellipsis. A passage without its text (an older server's answer) has no preview,
    and its button fetches the text from /api/chunk."""
    with open_page(browser, url, strict=True) as page:
        long = "word " * 100
        previews = page.evaluate("""async ([marked, long]) => {
          const { previewText } = await import('/static/js/sources.js');
          return [previewText(marked), previewText(long), previewText('## Only a heading')];
        }""", [MARKED_UP, long])
        marked, cut, heading = previews
        assert marked.startswith("The with statement calls __enter__() and __exit__(). It takes *args and **kwargs")
        for noise in ("===", "---", "``", "**with**", "*with*", "`__exit__"):
            assert noise not in marked
        assert cut.endswith("word…") and 150 < len(cut) <= 201 and heading == "Only a heading"

        page.evaluate("""async (id) => {
          const { sourceCard } = await import('/static/js/sources.js');
          const ul = document.createElement('ul');
          ul.className = 'sources';
          ul.append(sourceCard({ chunk_id: id, title: 'no text here' }, true, {}));
          const answer = document.createElement('div');
          answer.id = 'answer';
          answer.append(ul);
          document.querySelector('#result').replaceChildren(answer);
        }""", PASS_ID)
        fetched = card(page, PASS_ID)
        assert fetched.locator(".card-preview").count() == 0
        with page.expect_response(lambda r: "/api/chunk?" in r.url):
            fetched.locator("button.card-toggle").click()
        page.wait_for_function("document.querySelector('#answer .card-text').textContent.includes('null operation')")


# ---------------------------------------------------------------- phones and wide screens

@pytest.mark.parametrize("viewport", PHONES, ids=lambda v: f"{v['width']}x{v['height']}")
def test_on_a_phone_the_answer_comes_before_the_examples_and_nothing_is_wider_than_the_screen(browser, url, viewport):
    width = "document.scrollingElement.scrollWidth"
    with open_page(browser, url, strict=True, viewport=viewport) as page:
        # before a question: the form, then the examples
        assert box(page, ".panel.left")["y"] < box(page, ".examples-panel")["y"] < box(page, ".panel.right")["y"]
        assert page.evaluate(width) <= viewport["width"]
        ask(page, ALSO)
        form, answer, examples = box(page, ".panel.left"), box(page, "#answer"), box(page, ".examples-panel")
        assert form["y"] + form["height"] <= answer["y"] and answer["y"] + answer["height"] <= examples["y"]
        card(page, WITH_ID).locator("button.card-toggle").click()  # the whole passage, open in its card
        assert page.evaluate(width) <= viewport["width"]
        for selector in ("#question", "#ask-btn", "#answer", "#answer li.source-card", ".card-text:not([hidden])",
                         ".examples-panel", "#examples button.example"):
            b = box(page, selector)
            assert b["x"] >= 0 and b["x"] + b["width"] <= viewport["width"], (selector, b)
        page.click("#new-conversation")  # a new conversation: the examples come back up
        assert box(page, ".examples-panel")["y"] < box(page, ".panel.right")["y"]


def test_on_a_wide_screen_the_examples_stay_below_the_form_beside_the_answer(browser, url):
    with open_page(browser, url, strict=True, viewport=WIDE) as page:
        ask(page, ALSO)
        form, examples, right = box(page, ".panel.left"), box(page, ".examples-panel"), box(page, ".panel.right")
        assert examples["x"] == form["x"] and examples["width"] == form["width"]
        assert abs(examples["y"] - (form["y"] + form["height"])) < 1  # one box to the eye: no gap between the two
        assert right["x"] > form["x"] + form["width"] and right["y"] == form["y"]
        assert abs(right["y"] + right["height"] - (examples["y"] + examples["height"])) < 1  # both columns end together


# ---------------------------------------------------------------- the keyboard alone

def focused(page) -> str:
    """The focused element: its id, else its chunk id, else its tag and class."""
    return page.evaluate("(() => { const e = document.activeElement;"
                         " return e.id || (e.dataset.chunk ? `chunk:${e.dataset.chunk}` : `${e.tagName}.${e.className}`); })()")


def tab_until(page, target: str, limit: int = 40) -> list[str]:
    """Tab until ``target`` (as ``focused`` names it) has focus; the names on the way, ``target`` last."""
    seen = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        seen.append(focused(page))
        if seen[-1] == target:
            return seen
    raise AssertionError(f"Tab never reached {target}: {seen}")


def test_the_keyboard_alone_asks_opens_a_cited_passage_and_comes_back_to_its_link(browser, url):
    """From the top of the page: Tab reaches the tabs and then the question; typing and Enter asks (Shift+Enter would
    start a new line, as the hint under the box says); Tab goes question, configuration, artifact, Ask, and on into
    the answer to its citation; Enter opens the passage dialog with focus on its close button; Escape closes it and
    focus is back on the citation. Tab then reaches the citation's source card, whose button opens the whole passage."""
    with open_page(browser, url, strict=True) as page:
        assert tab_until(page, "question") == ["tab-ask", "tab-evals", "question"]
        assert "Enter asks" in page.locator("#question-hint").inner_text()
        page.keyboard.type("What does the with")
        page.keyboard.press("Shift+Enter")  # a new line, not a question
        page.keyboard.type("statement do?")
        assert page.input_value("#question") == "What does the with\nstatement do?"
        assert page.locator("#asked").is_hidden()
        page.keyboard.press("Control+a")
        page.keyboard.type(ANSWERABLE)
        page.keyboard.press("Enter")
        page.wait_for_selector("#answer")
        assert focused(page) == "question"
        order = tab_until(page, f"chunk:{WITH_ID}")
        assert order[:3] == ["config", "artifact", "ask-btn"], order
        assert order.index("copy-answer") < len(order) - 1  # the answer's Copy, then its citation
        assert page.evaluate("document.activeElement.closest('.answer-text') !== null")

        page.keyboard.press("Enter")
        page.wait_for_selector("#passage[open]")
        page.wait_for_function("document.querySelector('#passage-text').textContent.includes('context manager')")
        page.wait_for_function("document.activeElement.id === 'passage-close'")  # focus moves as the dialog opens
        page.keyboard.press("Escape")
        page.wait_for_selector("#passage:not([open])", state="attached")
        page.wait_for_function(f"document.activeElement.dataset.chunk === {WITH_ID!r}")  # and back as it closes
        assert page.evaluate("document.activeElement.closest('.answer-text') !== null")

        # Tab reaches the same id in its source card (a Tab may first meet the id elsewhere, e.g. when focus is lost
        # and Tab starts over from the top: the names on the way say which)
        seen = []
        for _ in range(3):
            seen += tab_until(page, f"chunk:{WITH_ID}")
            if page.evaluate("document.activeElement.closest('li.source-card') !== null"):
                break
        assert page.evaluate("document.activeElement.closest('li.source-card') !== null"), seen
        # on to the card's button: a preview that overflows is a scroll box, which takes focus first (axe asks for it)
        for _ in range(3):
            page.keyboard.press("Tab")
            seen.append(focused(page))
            if page.evaluate("document.activeElement.classList.contains('card-toggle')"):
                break
        assert page.evaluate("document.activeElement.classList.contains('card-toggle')"), seen
        assert page.evaluate("document.activeElement.closest('li.source-card').dataset.chunk") == WITH_ID, seen
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.getAttribute('aria-expanded')") == "true"
        assert card(page, WITH_ID).locator(".card-text").is_visible()
        page.keyboard.press("Space")
        assert page.evaluate("document.activeElement.getAttribute('aria-expanded')") == "false"


# ---------------------------------------------------------------- axe-core (tests.browser_support.axe_check)

@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_serious_violation_on_the_answer_the_evaluations_or_the_passage(browser, url, scheme):
    with open_page(browser, url, strict=True, viewport=WIDE) as page:
        page.emulate_media(color_scheme=scheme)
        axe_check(page, f"the empty ask page ({scheme})")
        ask(page, ALSO)
        card(page, WITH_ID).locator("button.card-toggle").click()
        page.locator("#notes summary").click()
        axe_check(page, f"the answer ({scheme})")
        page.locator("#trace summary").click()
        axe_check(page, f"the answer with its trace open ({scheme})")
        page.click(f"#answer .answer-text button.chunk[data-chunk='{PASS_ID}']")
        page.wait_for_function("document.querySelector('#passage-where').textContent.includes('part 3 of 3')")
        axe_check(page, f"the passage dialog ({scheme})")
        page.keyboard.press("Escape")
        page.wait_for_selector("#passage:not([open])", state="attached")

        page.click("#tab-evals")
        page.wait_for_selector("#metric-table tbody tr")
        page.wait_for_function("[...document.querySelectorAll('#plots img')].every(i => i.complete && i.naturalWidth > 0)")
        axe_check(page, f"the evaluations ({scheme})")
        page.click("#runs-table button.link:text('baseline')")
        page.wait_for_selector("#run-view details.failure")
        page.locator("#run-view details.failure").first.locator("summary").click()
        axe_check(page, f"a run's failure cases ({scheme})")
        # on a phone the tables scroll sideways in boxes of their own: a keyboard must reach them to scroll them
        page.set_viewport_size(PHONES[0])
        page.wait_for_function("[...document.querySelectorAll('#view-evals .table-scroll')]"
                               ".some((b) => b.scrollWidth > b.clientWidth && b.tabIndex === 0)")
        axe_check(page, f"the evaluations on a phone ({scheme})")
        page.click("#tab-ask")
        page.wait_for_selector("#answer", state="visible")  # shown on hashchange: its steps fade in again
        axe_check(page, f"the answer on a phone ({scheme})")
