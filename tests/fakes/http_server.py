"""LocalJsonServer: the HTTP plumbing the fake APIs share.

A stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (ephemeral port unless one is given) in a daemon thread, with
HTTP/1.1 keep-alive (the clients pool connections) and TCP_NODELAY (without it each call waits ~40 ms on Nagle's
algorithm). ``stop`` closes the listening socket and cuts open connections, so clients see refused connections;
``start`` again binds the same port. Subclasses implement ``respond``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LocalJsonServer(ABC):
    """Base class of the fakes: ``respond(method, path, headers, body) -> (status, JSON payload)``."""

    name = "fake"

    def __init__(self, port: int = 0) -> None:
        self._lock = threading.RLock()
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> Any:
        server = ThreadingHTTPServer(("127.0.0.1", self._port), _Handler)
        server.daemon_threads = True
        server.owner = self  # type: ignore[attr-defined]
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name=f"{self.name}-{self._port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting connections and cut the open ones; state is kept, so ``start`` resumes it."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            for conn in list(self._connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            self._connections.clear()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def restart(self) -> None:
        self.stop()
        self.start()

    @abstractmethod
    def respond(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        """Status and JSON body for one request."""

    def _track(self, conn: socket.socket, open_: bool) -> None:
        with self._lock:
            if open_:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def _owner(self) -> LocalJsonServer:
        owner: LocalJsonServer = self.server.owner  # type: ignore[attr-defined]
        return owner

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._owner._track(self.connection, open_=True)

    def finish(self) -> None:
        self._owner._track(self.connection, open_=False)
        super().finish()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        code, payload = self._owner.respond(self.command, self.path, headers, body)
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class QuietServer(ThreadingHTTPServer):
    """A threading HTTP server that logs nothing of a client that gave up: the stubs that hang on purpose."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        return


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 (an ephemeral port) in a daemon thread, for the ``with`` block: its URL."""
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def reply_json(handler: BaseHTTPRequestHandler, code: int, body: object) -> None:
    """Answer ``handler``'s request with ``code`` and ``body`` as JSON; a client that went away meanwhile is left be
    (a test's client gives up on purpose)."""
    payload = json.dumps(body).encode()
    try:
        handler.send_response(code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)
    except OSError:
        return
