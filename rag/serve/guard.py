"""Who may drive ``rag serve``: its own page and scripts on this machine, not any web page the user happens to open.

A server on loopback is still reachable from the user's browser, so every request passes three checks before it is
read (an ASGI middleware, ``Guard``); each refusal is the API's one-line JSON error:

* **Host** (421): only the names the server was started for: ``127.0.0.1``, ``localhost``, ``[::1]``, the ``--host``
  given and the address the connection arrived on; bound to every interface (``0.0.0.0``, ``::``), also any IP
  address and this machine's host name. A DNS-rebinding page reaches the server under its own domain name, so
  it cannot read the runs or the indexed documents.
* **Origin and Sec-Fetch-Site** (403), for ``/api/``: a request a browser sends from another origin (another site,
  another port of localhost, a sandboxed frame) is refused before it runs a question, even one the page could not
  read the answer of. Requests without these headers (curl, scripts) and the page's own (``same-origin``) pass.
* **Content-Type** (415): a POST must be ``application/json``, which a browser never sends cross-origin without
  a CORS preflight (and this server answers no preflight).

Two more middlewares wrap every request: ``BodyLimit`` refuses a body over ``MAX_BODY`` bytes (413), declared or
not, and ``SecurityHeaders`` adds ``SECURITY_HEADERS`` (a content security policy that lets the page load only its
own files, no framing, no referrer) to every response, refusals too.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

from fastapi.responses import JSONResponse

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("0.0.0.0", "::", "")
SAME = ("same-origin", "none")  # Sec-Fetch-Site values of the page's own requests and of a URL typed by the user
MAX_BODY = 64 * 1024  # a question (4,000 characters) and a history (rag.serve.app.MAX_HISTORY_CHARS) fit, as UTF-8 JSON
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; "
                               "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes (413), whether or not they declare a Content-Length."""

    def __init__(self, app: Any, limit: int = MAX_BODY) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        too_big = error(413, f"the request body is over {self.limit} bytes; send a shorter question or history")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await too_big(scope, receive, send)
        seen = 0

        async def limited() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooBig()
            return message

        try:
            await self.app(scope, limited, send)
        except _TooBig:
            await too_big(scope, receive, send)


class _TooBig(Exception):
    pass


class SecurityHeaders:
    """Add ``SECURITY_HEADERS`` to every response. Plain ASGI, not ``@app.middleware("http")``: Starlette's
    BaseHTTPMiddleware wraps ``receive``, and a request polling ``is_disconnected()`` through it never sees its
    client hang up."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k in SECURITY_HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.decode("latin-1").lower() not in names]
                message = {**message, "headers": [*kept, *((k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items())]}
            await send(message)

        await self.app(scope, receive, with_headers)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The API's one-line JSON error, ``{"error": message}``, with ``status``."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def hostname(host_header: str) -> str:
    """The name in a Host header, without the port, lower case: ``[::1]:8000`` -> ``::1``."""
    value = host_header.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def allowed_hosts(host: str = "127.0.0.1") -> frozenset[str]:
    """The Host names a server started with ``--host host`` answers for (``Guard`` adds the connection's address)."""
    names = {*LOOPBACK_NAMES, hostname(host)}
    if host.strip() in WILDCARDS:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(n for n in names if n)


def shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class Guard:
    """Refuse requests from other origins and hosts (see the module docstring); ``host`` is ``rag serve --host``."""

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        self.app = app
        self.host = host
        self.names = allowed_hosts(host)
        self.any_ip = host.strip() in WILDCARDS

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal = self.refusal(scope)
        if refusal is not None:
            return await refusal(scope, receive, send)
        return await self.app(scope, receive, send)

    def refusal(self, scope: dict) -> JSONResponse | None:
        """The error response for a request that may not be served, else None."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        host = headers.get("host", "")
        server = scope.get("server") or ("127.0.0.1", 0)
        own = f"http://{shown(str(server[0]))}:{server[1]}/"
        name = hostname(host)
        if not (name in self.names or name == str(server[0]).lower() or (self.any_ip and _is_ip(name))):
            allowed = ", ".join(shown(n) for n in sorted(self.names))
            return error(421, f"Host {host!r} is not one this server answers for ({allowed}); open {own} "
                               f"(a web page under another name cannot use rag serve), or start it with --host NAME")
        if scope.get("path", "").startswith("/api/"):
            origin = headers.get("origin")
            if origin is not None and origin.lower() not in (f"http://{host.lower()}", f"https://{host.lower()}"):
                return error(403, f"cross-origin request refused (Origin {origin!r}): rag serve answers only its "
                                   f"own page, {own}, and clients that send no Origin")
            site = headers.get("sec-fetch-site")
            if site is not None and site.lower() not in SAME:
                return error(403, f"cross-site request refused (Sec-Fetch-Site: {site}): rag serve answers only "
                                   f"its own page, {own}")
        if scope.get("method") == "POST":
            kind = headers.get("content-type", "")
            if kind.split(";")[0].strip().lower() != "application/json":
                return error(415, f"a POST needs Content-Type: application/json (got {kind or 'none'!r}); send "
                                   'the body as JSON, e.g. {"question": "What does pass do?"}')
        return None
