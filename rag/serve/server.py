"""Run the app with uvicorn: in the foreground (``rag serve``) or on a background thread (tests, notebooks).

The socket is bound here first, so a port in use or an address that is not this machine's is one clean error,
and port 0 picks a free port. Loopback is the default; any other address gets a warning that there is no
authentication.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from rag.errors import InputError

NO_AUTH_WARNING = ("Warning: rag serve has no authentication: anyone who can reach {host}:{port} can ask questions, "
                   "read the indexed documents and browse the eval runs. Use --host 127.0.0.1 unless that is what "
                   "you want.")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (InputError when it cannot be had)."""
    if not 0 <= port <= 65535:
        raise InputError(f"--port must be between 0 and 65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InputError(f"--host {host!r} is not an address of this machine ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another with --port") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


def _server(app: Any, log_level: str) -> Any:
    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=2, access_log=False)
    return uvicorn.Server(config)


def serve_forever(make_app: Callable[[], Any], host: str = "127.0.0.1", port: int = 8000) -> None:
    """Bind (so a busy port fails before anything loads), build the app, serve until Ctrl-C. Messages go to stderr."""
    if not is_loopback(host):
        print(NO_AUTH_WARNING.format(host=host, port=port), file=sys.stderr)
    sock = bind(host, port)
    try:
        app = make_app()
        print(f"Sieve is serving on {url_of(sock)} (Ctrl-C to stop)", file=sys.stderr)
        _server(app, "warning").run(sockets=[sock])
    finally:
        sock.close()


class Background:
    """The app served on a thread: ``with Background(app) as url: ...`` (loopback, a free port)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sock = bind(host, port)
        self.url = url_of(self.sock)
        self.server = _server(app, "error")
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self.url

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
