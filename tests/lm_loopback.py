"""Loopback test servers: the real llama-cpp-python OpenAI-compatible server, and a scripted proxy.

``FaultProxy`` speaks to the Groq SDK on 127.0.0.1. Each request takes the next scripted fault
(HTTP status, headers, body, delay), or, when the script is empty, is forwarded to the upstream
llama.cpp server with Groq's ``/openai/v1`` path prefix rewritten to ``/v1``; a streamed request's
answer is passed on piece by piece as the server writes it (and the upstream connection closed when
the client closes its own).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """``python -m llama_cpp.server`` over a GGUF file, on a free loopback port."""

    def __init__(self, model: Path, n_ctx: int = 2048, startup_timeout: float = 90.0):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.log = tempfile.TemporaryFile()  # a file, not a pipe: a full pipe would block the server
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
             "--port", str(self.port), "--n_ctx", str(n_ctx), "--seed", "0", "--verbose", "False"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env,
        )
        deadline = time.monotonic() + startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"llama_cpp.server exited: {self.log.read().decode()[-2000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/v1/models", timeout=1).read()
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {startup_timeout}s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


@dataclass
class Fault:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str = "{}"
    delay: float = 0.0  # seconds before answering (a slow server)


def to_llama_dialect(body: bytes) -> bytes:
    """Groq's wire names -> llama-cpp-python server's: ``json_schema`` response formats become
    ``json_object`` + ``schema`` (still grammar-constrained there), ``max_completion_tokens`` -> ``max_tokens``."""
    data = json.loads(body)
    fmt = data.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        data["response_format"] = {"type": "json_object", "schema": fmt["json_schema"]["schema"]}
    if "max_completion_tokens" in data:
        data["max_tokens"] = data.pop("max_completion_tokens")
    return json.dumps(data).encode()


class FaultProxy:
    def __init__(self, upstream: str | None):
        self.upstream = upstream
        self.script: list[Fault] = []
        self.requests: list[str] = []
        self.bodies: list[dict] = []  # each request's JSON body, as the client sent it
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy._lock:
                    proxy.requests.append(self.path)
                    proxy.bodies.append(json.loads(body or b"{}"))
                    fault = proxy.script.pop(0) if proxy.script else None
                if fault is not None:
                    time.sleep(fault.delay)
                    return self._send(fault.status, fault.headers, fault.body.encode())
                path = self.path.replace("/openai/v1/", "/v1/", 1)
                request = urllib.request.Request(proxy.upstream + path, data=to_llama_dialect(body),
                                                 headers={"Content-Type": "application/json"})
                if proxy.bodies[-1].get("stream"):
                    return self._relay(request)
                try:
                    with urllib.request.urlopen(request, timeout=120) as response:
                        return self._send(response.status, {}, response.read())
                except urllib.error.HTTPError as exc:
                    return self._send(exc.code, {}, exc.read())

            def _relay(self, request):
                """A streamed answer, each line passed on as it comes (HTTP/1.0: the body ends when the connection
                closes); when the client hangs up, the upstream connection is closed too."""
                try:
                    response = urllib.request.urlopen(request, timeout=120)
                except urllib.error.HTTPError as exc:
                    return self._send(exc.code, {}, exc.read())
                with response:
                    try:
                        self.send_response(response.status)
                        self.send_header("Content-Type", response.headers.get("Content-Type", "text/event-stream"))
                        self.end_headers()
                        for line in response:
                            self.wfile.write(line)
                            self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        pass  # the client closed the stream

            def _send(self, status, headers, payload):
                try:
                    self.send_response(status)
                    if "Content-Type" not in headers:
                        self.send_header("Content-Type", "application/json")
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def reset(self, *faults: Fault) -> None:
        with self._lock:
            self.script = list(faults)
            self.requests = []
            self.bodies = []

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def groq_error(message: str, code: str = "rate_limit_exceeded") -> str:
    return json.dumps({"error": {"message": message, "type": "tokens", "code": code}})
