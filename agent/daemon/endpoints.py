"""The one HTTP server of a replica: ``/healthz`` (alive), ``/readyz`` (recent successful tick), ``/metrics``, and
in dry-run ``/report`` (the shadow account as HTML).

Standard library server on its own thread; requests never touch the loop, they only read recorded state.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST

from agent.daemon.health import HealthState
from agent.daemon.metrics import DaemonMetrics
from models.clock import Clock

log = logging.getLogger(__name__)

# How often the serving thread looks for ``stop``'s request between connections: ``stop`` waits up to this long
# (the standard library's default of 0.5 s made every stop of the daemon wait a quarter of a second on average).
SHUTDOWN_POLL_S = 0.05


class EndpointServer:
    """Serves until ``stop``. ``port`` 0 picks a free port; ``address`` tells which one was bound."""

    def __init__(
        self,
        bind_address: str,
        port: int,
        health: HealthState,
        metrics: DaemonMetrics,
        clock: Clock,
        report: Callable[[datetime], str] | None = None,
    ) -> None:
        handler = _handler_for(health, metrics, clock, report)
        self._paths = "/healthz /readyz /metrics" + (" /report" if report is not None else "")
        self._server = ThreadingHTTPServer((bind_address, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_S},
            name="leadtime-endpoints",
            daemon=True,
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()
        log.info("endpoints: serving %s on %s:%d", self._paths, *self.address)

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() would wait forever for a server that never started
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()


def _handler_for(
    health: HealthState, metrics: DaemonMetrics, clock: Clock, report: Callable[[datetime], str] | None
) -> type[BaseHTTPRequestHandler]:
    paths = "/healthz, /readyz, /metrics" + (" or /report" if report is not None else "")

    class Handler(BaseHTTPRequestHandler):
        server_version = "leadtime"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                alive = health.liveness(clock.now())
                self._send(200 if alive.ready else 503, f"{alive.detail}\n".encode())
            elif path == "/readyz":
                state = health.readiness(clock.now())
                self._send(200 if state.ready else 503, f"{state.detail}\n".encode())
            elif path == "/metrics":
                self._send(200, metrics.exposition(), CONTENT_TYPE_LATEST)
            elif path == "/report" and report is not None:
                self._send(200, report(clock.now()).encode(), "text/html; charset=utf-8")
            else:
                self._send(404, f"not found: try {paths}\n".encode())

        def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("endpoints: " + format, *args)

    return Handler
