"""Recorded runs on the rag serve page, in real headless Chromium: with the queue full (a 503) or the model still
loading, an example that an eval run answered is offered as "Show a recorded answer (recorded <date> with <model>)"
and played back, its steps one by one and then its answer, under a label that says it is a recording, with its date
and model; a question typed exactly as a recorded one gets the offer too; recorded untrusted text stays text; and a
live answer never carries the label. The eval runs are written by the real runner (tests/test_serve_recordings.py)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from tests.browser_support import browser, completed_nodes, needs_chromium, open_page, shots  # noqa: F401
from tests.browser_support import screenshot as _screenshot
from tests.serve_support import (  # noqa: F401
    ANSWERABLE,
    SLOW,
    XSS,
    LoadingLM,
    SlowLoad,
    gate,
    scripted_lms,
    serve,
    serve_index,
    server_runner,
)
from tests.test_serve_recordings import MODEL, record_run, records

pytestmark = needs_chromium

LOAD_S = 5.0  # the model's loading time in the loading test: long enough to click the offer while it loads


@pytest.fixture(scope="module")
def runs(tmp_path_factory, gate):
    root = tmp_path_factory.mktemp("playback-runs")
    record_run(root / "eval-full", serve_index(tmp_path_factory), gate)
    return root


@pytest.fixture(scope="module")
def recorded_on(runs) -> str:
    """The day the example's recording was made, as the label says it."""
    return records(runs / "eval-full")[ANSWERABLE]["finished_at"][:10]


@pytest.fixture(scope="module")
def busy_server(tmp_path_factory, gate, runs):
    """One worker and no waiting places: one question running fills the queue."""
    with serve(serve_index(tmp_path_factory), gate, max_waiting=0, runs=runs) as base:
        assert httpx.post(base + "/api/ask", json={"question": ANSWERABLE}, timeout=600).status_code == 200  # warm up
        yield base


def wait_until(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


class Busy:
    """``with Busy(url, gate):`` SLOW runs, its grader held on the gate: the queue is full until the block ends."""

    def __init__(self, url: str, gate: threading.Event) -> None:
        self.url, self.gate, self.runner = url, gate, server_runner(url)
        self.thread = threading.Thread(target=self._ask, daemon=True)

    def _ask(self) -> None:
        httpx.post(self.url + "/api/ask", json={"question": SLOW}, timeout=120)

    def __enter__(self) -> None:
        self.gate.clear()
        self.thread.start()
        wait_until(lambda: self.runner.pending() == 1)

    def __exit__(self, *exc) -> None:
        self.gate.set()
        self.thread.join(timeout=60)
        wait_until(lambda: self.runner.pending() == 0)


def example(page, question: str):
    return page.locator("#examples button.example", has_text=question)


def label_text(date: str) -> str:
    return f"Recorded run, {date}, {MODEL} — not a live answer"


def assert_played_back(page, date: str) -> None:
    """The recording plays: a first step before the answer, then all of them and the answer, under the label."""
    page.wait_for_selector("#timeline li.step")
    assert page.locator("#answer").count() == 0 and page.locator("#timeline li.step").count() < 3  # one by one
    page.wait_for_selector("#answer.recorded")
    label = page.locator("#recorded-label")
    assert label.inner_text() == label_text(date) and label.get_attribute("role") == "note" and label.is_visible()
    assert page.locator("#recorded-label time").get_attribute("datetime").startswith(date)
    assert page.locator("#answer").get_attribute("aria-describedby") == "recorded-label"
    assert completed_nodes(page) == ["retrieve", "grade", "answer"]
    assert page.locator("#progress").inner_text().startswith(f"Played back a run recorded {date}")
    assert page.locator("#stop-btn").is_hidden()


def assert_live(page) -> None:
    page.wait_for_function("document.querySelector('#progress').textContent.startsWith('Done in')")
    assert page.locator("#answer").is_visible() and page.locator("#answer.recorded").count() == 0
    assert page.locator("#recorded-label").count() == 0 and "Recorded run" not in page.locator("body").inner_text()
    assert page.locator("#program").inner_text().startswith("Using")


def test_a_full_queue_offers_the_examples_recorded_run_and_plays_it_back_labelled(browser, busy_server, gate,
                                                                                recorded_on, shots):
    """The queue full, a click on an example gets the 503 message and the offer; the recording plays back with its
    label, and is no turn of the conversation. Once the queue has room, the same example is answered live, unlabelled."""
    with open_page(browser, busy_server) as page:
        with Busy(busy_server, gate):
            example(page, ANSWERABLE).click()
            page.wait_for_selector("#recording-btn")
            assert "busy" in page.locator("#ask-error").inner_text()
            offer = page.locator("#recording-btn")
            assert offer.inner_text() == f"Show a recorded answer (recorded {recorded_on} with {MODEL})"
            offer.click()
            assert_played_back(page, recorded_on)
            assert page.locator("#ask-error").is_hidden()
            assert page.evaluate("sessionStorage.getItem('sieve.conversation')") in (None, "[]")
            _screenshot(page, shots, "serve-recorded.png")
        example(page, ANSWERABLE).click()
        assert_live(page)


def test_a_typed_question_that_matches_a_recording_gets_it_and_its_untrusted_text_stays_text(browser, busy_server,
                                                                                            gate, recorded_on):
    with open_page(browser, busy_server) as page:
        with Busy(busy_server, gate):
            page.fill("#question", f"  {XSS} ")
            page.click("#ask-btn")
            page.locator("#recording-btn").click()
            page.wait_for_selector("#answer.recorded")
            assert page.locator("#recorded-label").inner_text() == label_text(recorded_on)
            assert page.evaluate("window.__xss") is None
            assert "<script>" in page.locator("#timeline li.step-grade .reason").inner_text()
            assert "onerror" in page.locator("#answer .answer-text").inner_text()
            # a question with no recording gets the 503 message alone
            page.fill("#question", "What does the yield statement do?")
            page.click("#ask-btn")
            page.wait_for_selector("#ask-error:not([hidden])")
            page.wait_for_timeout(500)
            assert page.locator("#recording-btn").count() == 0 and page.locator("#recorded-label").count() == 0


def test_while_the_model_loads_the_recorded_run_is_offered_and_a_live_answer_follows(browser, tmp_path_factory, gate,
                                                                                    runs, recorded_on):
    """A first question waits for the model (LOAD_S): the example's recording is offered at once, without asking the
    server for recordings it does not have (a strict page: no 404). Showing it stops the question while it loads; the
    model goes on loading, and the next question gets a live answer, unlabelled."""
    lms = scripted_lms(gate)
    lms["grader"] = LoadingLM(lms["grader"].answers, SlowLoad(LOAD_S))
    with serve(serve_index(tmp_path_factory), gate, lms=lms, runs=runs) as base, \
            open_page(browser, base, strict=True) as page:
        runner = server_runner(base)
        example(page, ANSWERABLE).click()
        page.wait_for_selector("#recording-btn")
        assert page.locator("#progress").inner_text().startswith(("Loading", "Waiting for the program"))
        page.click("#recording-btn")
        assert_played_back(page, recorded_on)
        wait_until(lambda: runner.pending() == 0)
        assert [e["while"] for e in runner.log if e["question"] == ANSWERABLE] == ["loading"]
        example(page, ANSWERABLE).click()
        assert_live(page)
        assert page.locator("#recording-btn").count() == 0
