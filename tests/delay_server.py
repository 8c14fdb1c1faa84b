"""A loopback OpenAI-compatible chat server that answers after a fixed delay: an LM-bound workload like Groq's.

It speaks the chat-completions wire the Groq SDK uses (``/openai/v1/chat/completions``, also ``/v1/...``), so
``GroqEngine`` (rate limiter, retries, ledger) runs unchanged against it. Each answer is a JSON object that fits
the request's ``json_schema`` (booleans true, strings "ok", arrays empty, numbers 0, enums their first value),
or plain text. Every request's arrival time is kept, to check what a rate limit let through. ``fail_next``
scripts HTTP errors (a 429 with a daily-quota message, ...) for the next requests.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_DEPTH = 8  # nesting followed when filling a schema


def fill(schema: dict[str, Any], depth: int = 0) -> Any:
    """The simplest value that fits ``schema`` (the subset DSPy's signatures produce)."""
    if depth > MAX_DEPTH:
        return None
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return fill(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        return {name: fill(sub, depth + 1) for name, sub in schema.get("properties", {}).items()}
    return {"boolean": True, "string": "ok", "array": [], "integer": 0, "number": 0.0}.get(kind)


class DelayServer:
    """``DelayServer(delay=0.5)``; ``.url`` for ``GroqEngine(base_url=...)``; ``.arrivals`` (monotonic seconds)."""

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.arrivals: list[float] = []
        self.errors: list[tuple[int, dict[str, str], str]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # /v1/models, for a liveness check
                self._send(200, {}, json.dumps({"object": "list", "data": [{"id": "delay", "object": "model"}]}))

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with server._lock:
                    server.arrivals.append(time.monotonic())
                    error = server.errors.pop(0) if server.errors else None
                if error is not None:
                    return self._send(*error)
                time.sleep(server.delay)
                fmt = body.get("response_format") or {}
                schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None
                content = json.dumps(fill(schema)) if schema else ("{}" if fmt.get("type") == "json_object" else "ok")
                prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
                reply = {"id": f"delay-{len(server.arrivals)}", "object": "chat.completion", "created": int(time.time()),
                         "model": body.get("model", "delay"),
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": content}}],
                         "usage": {"prompt_tokens": prompt, "completion_tokens": len(content) // 4,
                                   "total_tokens": prompt + len(content) // 4}}
                self._send(200, {}, json.dumps(reply))

            def _send(self, status, headers, payload):
                data = payload.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def fail_next(self, status: int, body: str, headers: dict[str, str] | None = None, times: int = 1) -> None:
        with self._lock:
            self.errors.extend([(status, dict(headers or {}), body)] * times)

    def reset(self) -> None:
        with self._lock:
            self.arrivals, self.errors = [], []

    def max_in_window(self, window: float) -> int:
        """The most requests that arrived within any ``window`` seconds."""
        times = sorted(self.arrivals)
        best, start = 0, 0
        for end, t in enumerate(times):
            while t - times[start] >= window:
                start += 1
            best = max(best, end - start + 1)
        return best

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
