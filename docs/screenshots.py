"""The web page's screenshots in docs/, made from the real embedded model on the built-in corpus.

    rag index -q                                   # the built-in index, once
    python docs/screenshots.py                     # docs/serve-real-*.png, a few minutes on 2 cores

Starts ``rag serve`` on the embedded default (no key, no network), asks one answerable and one out-of-scope
question in headless Chromium (Debian's ``chromium``, driven by Playwright, as the browser tests do) at desktop and
phone sizes, and saves what a person sees once each answer is done. The scripted-model screenshots
(``UPDATE_DOCS_SCREENSHOTS=1 pytest tests/test_serve_browser.py``) show every part of the page deterministically;
these show what the shipped model really answers, with its real timings.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
ANSWERABLE = "What does the nonlocal statement do?"
OUT_OF_SCOPE = "What is the boiling point of water at sea level?"
DESKTOP = {"width": 1360, "height": 900}
PHONE = {"width": 390, "height": 844}
PHONE_QUESTION = "What does the pass statement do?"
WAIT_S = 900  # a first question loads the model; a refusal takes two rewrites


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, server: subprocess.Popen, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"rag serve exited with code {server.returncode}; see its output above")
        try:
            with urllib.request.urlopen(f"{url}/api/info", timeout=5):
                return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"rag serve did not answer at {url} within {timeout_s:.0f} s")


def ask(page, question: str, out: Path, full_page: bool) -> None:
    """Ask ``question`` and save the page once the answer (or the refusal) is shown."""
    page.fill("#question", question)
    page.click("#ask-btn")
    page.wait_for_selector("#answer, #refusal", timeout=WAIT_S * 1000)
    page.wait_for_timeout(500)  # the answer's scroll and the fold of the trace settle
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(out), full_page=full_page)
    print(f"saved {out}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DOCS, help="folder for the PNG files (default: docs/)")
    ap.add_argument("--set", action="append", default=["cache=false"], metavar="KEY=VALUE",
                    help="passed to rag serve (default: cache=false, so the times shown are the model's)")
    args = ap.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("Debian's chromium is needed: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    rag = shutil.which("rag") or str(Path(sys.executable).with_name("rag"))
    cmd = [rag, "serve", "--port", str(port)] + [x for s in args.set for x in ("--set", s)]
    server = subprocess.Popen(cmd, env=os.environ.copy())
    try:
        wait_ready(url, server)
        args.out.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
            desktop = browser.new_context(viewport=DESKTOP).new_page()
            desktop.goto(url)
            ask(desktop, ANSWERABLE, args.out / "serve-real-answer.png", full_page=True)
            desktop.click("#new-conversation")  # the refusal is asked on its own, not as a follow-up
            ask(desktop, OUT_OF_SCOPE, args.out / "serve-real-refused.png", full_page=True)
            phone = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True).new_page()
            phone.goto(url)
            ask(phone, PHONE_QUESTION, args.out / "serve-real-phone.png", full_page=False)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
