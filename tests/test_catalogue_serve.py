"""The failure catalogue for ``rag serve`` (issue 38): each case against a real uvicorn server on loopback, serving
the real agent over a real index (tests/serve_support.py) with a DummyLM per role, or the real CLI in-process
(tests/catalogue_support.run_cli).

* other web pages cannot drive the server: a foreign Host (DNS rebinding) is 421, another Origin or
  Sec-Fetch-Site is 403, a POST that is not ``application/json`` is 415, each before anything runs;
* a question holding a lone surrogate is a 400 before it queues;
* a client that hangs up gives its place in the queue back at once, and a running question stops at its next node;
* the run list counts results as ``rag report`` does, not as a stale summary.json says;
* ``rag serve --runs`` naming a file or a missing folder is one line naming the flag.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from rag.errors import InputError
from tests.catalogue_support import check, checksums, run_cli, run_folder
from tests.serve_support import (  # noqa: F401
    ANSWERABLE,
    PASS_ID,
    SLOW,
    gate,
    scripted_lms,
    serve,
    serve_index,
    server_runner,
)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return serve_index(tmp_path_factory)


@pytest.fixture(scope="module")
def lms(gate):
    return scripted_lms(gate)


@pytest.fixture(scope="module")
def url(index, gate, lms):
    with serve(index, gate, lms=lms) as base:
        yield base


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def wait_for(condition, seconds: float = 60.0) -> bool:
    """Whether ``condition`` holds within ``seconds``; generous, since a loaded 2-core machine is slow, and a
    condition that holds returns at once."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def asked(lm, question: str) -> int:
    """How many prompts ``lm`` (a GatedLM) was sent about ``question``."""
    return sum(question in prompt for prompt in lm.calls)


# ---------------------------------------------------------------- 23: only the server's own page and local clients
@pytest.mark.parametrize("path", ["/api/runs", f"/api/chunk?id={quote(PASS_ID)}", "/api/info", "/"])
def test_a_dns_rebinding_page_cannot_read_the_server(url, path):
    """A page on attacker.example whose name now resolves to 127.0.0.1 reaches the server with its own Host."""
    r = httpx.get(url + path, headers={"host": f"attacker.example:{port_of(url)}"})
    assert r.status_code == 421, r.text
    message = r.json()["error"]
    assert f"Host 'attacker.example:{port_of(url)}' is not one this server answers for" in message
    assert "127.0.0.1" in message and "--host" in message and "pass is a null operation" not in r.text


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
def test_the_loopback_names_are_served(url, host):
    r = httpx.get(url + f"/api/chunk?id={quote(PASS_ID)}", headers={"host": f"{host}:{port_of(url)}"})
    assert r.status_code == 200 and "pass is a null operation" in r.json()["text"]


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None])
def test_a_post_that_is_not_json_is_refused_before_it_runs(url, lms, kind):
    """Browsers send these cross-origin without asking first (no CORS preflight): a question must not run."""
    body = json.dumps({"question": ANSWERABLE + " (415)"}).encode()
    headers = {"content-type": kind} if kind else {}
    r = httpx.post(url + "/api/ask", content=body, headers=headers)
    assert r.status_code == 415, r.text
    assert r.json()["error"].startswith("a POST needs Content-Type: application/json")
    assert repr(kind or "none") in r.json()["error"]
    assert asked(lms["grader"], "(415)") == 0


@pytest.mark.parametrize("headers", [
    {"origin": "http://attacker.example"},
    {"origin": "null"},  # a sandboxed frame or a file:// page
    {"origin": "http://127.0.0.1:1"},  # another port of this machine is another origin
    {"sec-fetch-site": "cross-site"},
    {"sec-fetch-site": "same-site"},
], ids=["other-site", "null-origin", "other-port", "cross-site", "same-site"])
@pytest.mark.parametrize("method, path", [("GET", "/api/runs"), ("GET", "/api/stream?question=Q403"),
                                          ("POST", "/api/ask")])
def test_a_cross_origin_request_is_refused_before_it_runs(url, lms, headers, method, path):
    r = httpx.request(method, url + path, headers={**headers, "content-type": "application/json"},
                      content=json.dumps({"question": "Q403"}) if method == "POST" else None)
    assert r.status_code == 403, r.text
    message = r.json()["error"]
    assert re.match(r"^cross-(origin|site) request refused \((Origin|Sec-Fetch-Site)", message), message
    assert f"http://127.0.0.1:{port_of(url)}/" in message
    assert asked(lms["grader"], "Q403") == 0


def test_the_page_itself_still_asks(url):
    """The page's own requests: same-origin, with its Origin on a POST; a link from elsewhere still opens the page."""
    own = {"origin": url, "sec-fetch-site": "same-origin", "sec-fetch-mode": "cors"}
    r = httpx.post(url + "/api/ask", json={"question": ANSWERABLE}, headers=own, timeout=120)
    assert r.status_code == 200 and r.json()["citations"], r.text
    r = httpx.get(url + "/", headers={"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"})
    assert r.status_code == 200 and "<title>Sieve</title>" in r.text
    assert r.headers["content-security-policy"]
    r = httpx.get(url + "/api/runs", headers={"sec-fetch-site": "none"})  # a URL the user typed
    assert r.status_code == 200


def test_the_host_given_with_dash_dash_host_is_served(index, gate):
    with serve(index, gate, host="127.0.0.2") as base:
        port = port_of(base)
        assert httpx.get(base + "/api/runs").status_code == 200  # Host: 127.0.0.2:port
        assert httpx.get(base + "/api/runs", headers={"host": f"localhost:{port}"}).status_code == 200
        r = httpx.get(base + "/api/runs", headers={"host": f"sieve.attacker.example:{port}"})
        assert r.status_code == 421 and "127.0.0.2" in r.json()["error"]


def test_bound_to_every_interface_any_address_is_served_but_no_other_name(index, gate):
    from rag.serve.guard import Guard

    guard = Guard(app=None, host="0.0.0.0")
    scope = {"type": "http", "method": "GET", "path": "/api/runs", "server": ("192.0.2.7", 8000)}
    assert guard.refusal({**scope, "headers": [(b"host", b"192.0.2.7:8000")]}) is None
    assert guard.refusal({**scope, "headers": [(b"host", b"[2001:db8::1]:8000")]}) is None
    assert guard.refusal({**scope, "headers": [(b"host", socket.gethostname().encode() + b":8000")]}) is None
    assert guard.refusal({**scope, "headers": [(b"host", b"attacker.example:8000")]}).status_code == 421
    assert guard.refusal({**scope, "headers": []}).status_code == 421  # no Host at all


# ---------------------------------------------------------------- 9: a lone surrogate
def test_a_question_with_a_lone_surrogate_is_a_400_before_it_queues(url, lms):
    body = b'{"question": "x \\ud800 y surrogate"}'  # valid JSON, not valid text
    r = httpx.post(url + "/api/ask", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith("question: character 3 is U+D800, a lone surrogate, which is not text; send "
                                        "valid UTF-8")
    assert server_runner(url).pending() == 0 and asked(lms["grader"], "surrogate") == 0


def test_the_retriever_names_any_lone_surrogate(index):
    from rag.retrieval.retriever import Retriever

    retriever = Retriever(index)
    with pytest.raises(InputError, match=r"not valid UTF-8 text \(lone surrogate U\+D800 at character 3\)"):
        retriever.prepare_query("x \ud800 y")
    with pytest.raises(InputError, match=r"\(bad byte at character 3: b'\\xff'\)"):
        retriever.prepare_query("x \udcff y")  # what argv makes of a byte that is not UTF-8


# ---------------------------------------------------------------- 11: clients that hang up
def raw_request(base: str, method: str, target: str, body: bytes = b"") -> socket.socket:
    """A request sent on a plain socket, left open: the test hangs up by closing it."""
    port = port_of(base)
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = (f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    sock.sendall(head + body)
    return sock


def ask_raw(base: str, question: str) -> socket.socket:
    return raw_request(base, "POST", "/api/ask", json.dumps({"question": question}).encode())


@pytest.mark.parametrize("how", ["ask", "stream"])
def test_clients_that_hang_up_give_their_places_back(index, how):
    """One question runs (its grader waits on the gate) and eight wait behind it; all nine clients hang up. The eight
    leave the queue at once, so a new user is next in line; the running one stops before its answer is written."""
    gate = threading.Event()
    lms = scripted_lms(gate)
    with serve(index, gate, lms=lms) as base, httpx.Client(base_url=base, timeout=120) as client:
        runner = server_runner(base)
        try:
            if how == "ask":
                running = ask_raw(base, SLOW)
            else:
                running = raw_request(base, "GET", "/api/stream?" + str(httpx.QueryParams({"question": SLOW})))
            assert wait_for(lambda: asked(lms["grader"], SLOW) == 1, 180), "the slow question never reached its grader"
            waiting = [ask_raw(base, ANSWERABLE) for _ in range(8)]
            assert wait_for(lambda: runner.pending() == 9), runner.pending()
            for sock in [running, *waiting]:
                sock.close()
            assert wait_for(lambda: runner.pending() == 1, 30), f"{runner.pending()} still waiting or running"
            with client.stream("GET", "/api/stream", params={"question": ANSWERABLE}) as r:
                lines = r.iter_lines()
                first = next(json.loads(line[6:]) for line in lines if line.startswith("data: "))
                assert first["state"] == "queued" and first["ahead"] == 0, first
                gate.set()  # the slow grader answers; its question stops at the next node
                assert any(line == "event: done" for line in lines)
        finally:
            gate.set()
        assert wait_for(lambda: runner.pending() == 0)
        assert asked(lms["answerer"], SLOW) == 0  # stopped before the answer node
        assert asked(lms["grader"], ANSWERABLE) == 1 and asked(lms["answerer"], ANSWERABLE) == 1  # only the new user's


# ---------------------------------------------------------------- 21: the run list reads results as rag report does
@pytest.mark.parametrize("damage", ["empty", "all-damaged"])
def test_the_run_list_counts_what_results_jsonl_holds(index, gate, tmp_path, damage):
    run_folder()(tmp_path)
    results = tmp_path / "run" / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines()
    results.write_text("" if damage == "empty" else "".join("#### not json\n" for _ in lines), encoding="utf-8")
    before = checksums(tmp_path)
    with serve(index, gate, runs=tmp_path) as base:
        rows = httpx.get(base + "/api/runs").json()["runs"]
    assert [(r["name"], r["n_done"], r["n_selected"], r["complete"]) for r in rows] == [("run", 0, 3, False)]
    assert any("counts 3 finished items" in note and "0 readable" in note for note in rows[0]["notes"]), rows
    report = run_cli("report", tmp_path / "run")
    assert "| Items (done / selected) | 0 / 3 |" in report.out, report.out + report.err
    assert checksums(tmp_path) == before


def test_a_sound_run_lists_without_notes(url):
    rows = {r["name"]: r for r in httpx.get(url + "/api/runs").json()["runs"]}
    assert (rows["full"]["n_done"], rows["full"]["complete"], rows["full"]["notes"]) == (8, True, [])


# ---------------------------------------------------------------- 22: rag serve --runs
@pytest.fixture()
def busy_port():
    """A port already in use: were --runs not checked first, rag serve would stop on it instead of serving forever."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


@pytest.mark.parametrize("what, says", [("file", "is not a folder"), ("missing", "does not exist")])
def test_serve_runs_must_be_a_folder(tmp_path: Path, monkeypatch, busy_port, what, says):
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "passwd"
    if what == "file":
        target.write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    before = checksums(tmp_path)
    res = run_cli("serve", "--runs", target, "--port", busy_port)
    check(res, 1, rf"^Error: --runs {re.escape(str(target))} {says}; pass the folder rag eval writes its runs in")
    assert "cannot listen" not in res.err and checksums(tmp_path) == before
