"""A refit whose history read misses some classes says which, and counts each.

A refit beside the ticks reads ``forecast.history`` class by class. A class whose read failed before the refit's
deadline (Prometheus refusing its query) was dropped in silence: the refit fitted the others and was swapped in, the
class went on with its model and calibration from the last fit, and neither the log nor ``leadtime_errors_total``
said so (0 warnings, 0 counted). Each class not read is now logged, named, with what is kept, and counted as
``MetricsUnavailable``, the class the ticks count a failed read by.

A small local HTTP server stands in for Prometheus; the real prometheus-api-client and requests session talk to it.
It answers an instant query (``/api/v1/query``) with a vector and a range query (``/api/v1/query_range``) with a
matrix on the requested step grid, as the Prometheus HTTP API reference documents them ("Instant queries", "Range
queries": ``{"status": "success", "data": {"resultType": "vector"|"matrix", "result": [...]}}``, each sample value a
string). A range query of the broken namespace is refused as the reference's "Format overview" documents a query
that cannot be executed: HTTP 422 with ``{"status": "error", "errorType": "execution", "error": "..."}``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import pytest

from models.clock import SimulatedClock
from tests.daemon.test_refit_read_does_not_hold_ticks import NOW, _daemon, _settings
from tests.fakes.http_server import serving


@dataclass
class Broken:
    """``namespace``: the class whose range queries Prometheus refuses, when set."""

    namespace: str | None = None


class _Handler(BaseHTTPRequestHandler):
    broken: Broken
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlparse(self.path)
        args = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if url.path == "/api/v1/query":
            sample = {"metric": {}, "value": [float(args.get("time", time.time())), "4"]}
            self._reply(200, {"status": "success", "data": {"resultType": "vector", "result": [sample]}})
            return
        broken = self.broken.namespace
        if broken is not None and f'namespace="{broken}"' in args["query"]:
            refused = "query processing would load too many samples into memory"
            self._reply(422, {"status": "error", "errorType": "execution", "error": refused})
            return
        start, end, step = (int(float(args[k])) for k in ("start", "end", "step"))
        values = [[t, "4"] for t in range(start, end + 1, step)]
        self._reply(
            200, {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}}
        )

    def _reply(self, status: int, body: object) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def prometheus() -> Iterator[tuple[str, Broken]]:
    broken = Broken()
    with serving(type("Handler", (_Handler,), {"broken": broken})) as url:
        yield url, broken


def test_a_class_the_refit_did_not_read_is_logged_and_counted(
    prometheus: tuple[str, Broken], caplog: pytest.LogCaptureFixture
) -> None:
    url, broken = prometheus
    clock = SimulatedClock(NOW)
    assembled = _daemon(_settings(url, "1m", "1h"), clock)
    daemon, agent, metrics = assembled.daemon, assembled.loop.agent, assembled.metrics
    daemon.elect()
    daemon.refit()  # every class read
    assert metrics.errors.labels("MetricsUnavailable")._value.get() == 0

    broken.namespace = "team-2"
    clock.advance(timedelta(hours=1))
    with caplog.at_level(logging.WARNING, logger="agent.loop"):
        daemon.refit()

    assert agent.last_refit == clock.now()  # the classes read were refitted and swapped in
    warnings = [r.getMessage() for r in caplog.records if r.name == "agent.loop" and r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "the history of class team-2 was not read" in warnings[0]
    assert "its model and calibration are kept from the last fit" in warnings[0]
    assert "too many samples" in warnings[0]  # Prometheus's own reason
    assert metrics.errors.labels("MetricsUnavailable")._value.get() == 1
