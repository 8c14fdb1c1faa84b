"""What the Chromium tests of the rag serve page share: Playwright in Debian's chromium (skipped, with the install
command, where either is missing), the launch flags for a closed network, one browser per module, a page that
fails its test on a dialog (and, strict, on any JavaScript error, console error or HTTP error), screenshots, and an
axe-core check (no serious or critical violation)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sync_api = pytest.importorskip("playwright.sync_api", reason='Playwright is not installed: pip install -e ".[test]"')
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed: apt-get install -y chromium")
# As root, in a closed network: no sandbox, no background connections to Google's hosts.
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
TIMEOUT_MS = 180_000  # generous: a loaded 2-core machine


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def _console_error(errors: list[str], message: Any) -> None:
    """Any console error (the page names its own icon, so Chromium asks for no /favicon.ico)."""
    if message.type == "error":
        errors.append(f"console.error: {message.text} ({message.location.get('url', '')})")


@contextlib.contextmanager
def open_page(browser: Any, url: str, *, strict: bool = False, **options: Any) -> Iterator[Any]:
    """The page at ``url``, ready. The page's CSP would block an injected inline script on its own; bypassing it makes
    an XSS test check that untrusted text is never inserted as HTML at all (test_serve_api checks the header).
    ``options`` go to the browser context: ``viewport={"width": 390, "height": 844}`` (a phone),
    ``color_scheme="dark"``."""
    context = browser.new_context(**{"viewport": {"width": 1360, "height": 900}, "bypass_csp": True, **options})
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    dialogs: list[str] = []
    if strict:
        pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
        pg.on("console", lambda m: _console_error(errors, m))
        pg.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready='1']")
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
    assert not dialogs, f"a dialog opened: {dialogs}"


def screenshot(page: Any, shots: Path, name: str) -> Path:
    path = shots / name
    page.screenshot(path=str(path), full_page=False, animations="disabled")  # the steps' fade-in, finished
    assert path.stat().st_size > 10_000
    return path


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


# The WCAG contrast ratio of an element's text against the background it sits on (the first ancestor, or itself, with an
# opaque background colour): rgb() values as Chromium computes them.
CONTRAST_JS = r"""el => {
  const rgb = (c) => c.match(/[\d.]+/g).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  let node = el, bg = null;
  while (node && node.nodeType === 1) {
    const c = rgb(getComputedStyle(node).backgroundColor);
    if (c.length < 4 || c[3] === 1) { bg = c; break; }
    node = node.parentElement;
  }
  const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(bg || [255, 255, 255])].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""


def contrasts(page: Any, selector: str) -> dict[str, float]:
    """The contrast ratio of each visible element that ``selector`` finds and that holds text of its own (not only its
    children's), keyed by its tag, class and text."""
    return dict(page.eval_on_selector_all(selector, f"""els => els
      .filter((e) => e.offsetParent !== null && [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()))
      .map((e) => [`${{e.tagName.toLowerCase()}}.${{e.className}}: ${{e.textContent.trim().slice(0, 40)}}`, ({CONTRAST_JS})(e)])"""))


def completed_nodes(page: Any) -> list[str]:
    return page.eval_on_selector_all("#timeline li.step:not(.pending)", "els => els.map(e => e.dataset.node)")


# ---------------------------------------------------------------- axe-core
SERIOUS = ("serious", "critical")
# every animation that ends (the steps' fade-in, not a running spinner) has ended
FINISHED = "document.getAnimations().every((a) => a.effect.getTiming().iterations === Infinity || a.playState === 'finished')"


def axe_check(page, where: str) -> None:
    """axe-core (axe-playwright-python's bundled axe.min.js) over the page as it is: no serious or critical violation."""
    axe = pytest.importorskip("axe_playwright_python.sync_playwright", reason="pip install axe-playwright-python")
    page.wait_for_function(FINISHED)  # a step fading in (opening the folded trace replays it) is not low contrast
    results = axe.Axe().run(page)
    found = [f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']]} - {v['help']}"
             for v in results.response["violations"] if v["impact"] in SERIOUS]
    assert not found, f"axe on {where}:\n" + "\n".join(found)
