"""The waits between retries of a failed query are what ``prometheus.retry_backoff_s``'s documentation says: the
first retry is sent at once, the second after twice ``retry_backoff_s``, each later one after twice the wait before
it (urllib3 2's ``Retry.get_backoff_time``: ``backoff_factor * 2 ** (n - 1)`` for the n-th consecutive error, 0
for the first), and a ``Retry-After`` the server sends is waited instead. The documentation said "Wait before the
first retry, doubling after each", i.e. 0.25 s, 0.5 s, 1 s for 0.25; measured: 0.00 s, 0.54 s, 1.00 s.

A small local HTTP server stands in for an overloaded Prometheus (503 ``errorType: unavailable``, web/api/v1/api.go
``errorUnavailable`` -> ``http.StatusServiceUnavailable``) and records when each request arrives; the real
prometheus-api-client and requests session talk to it. Measured are the gaps between arrivals, which hold the wait
and one local round trip (a few milliseconds)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler

import pytest

from agent.sources.prometheus import PrometheusSource
from config.field_docs import FIELDS
from config.prometheus import PrometheusSettings
from models import MetricsUnavailable
from tests.fakes.http_server import serving

NOW = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
BUSY = {"status": "error", "errorType": "unavailable", "error": "too many outstanding requests"}
BACKOFF_S = 0.25
SLACK_S = 0.2  # a round trip on a busy machine, beyond the wait; less than BACKOFF_S


@dataclass
class Overloaded:
    """Answers every request 503; the answer to the request numbered ``retry_after_on`` (from 1) carries
    ``Retry-After: <retry_after>`` (RFC 9110 section 10.2.3: seconds)."""

    retry_after_on: int = 0
    retry_after: str = "1"
    arrivals: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def gaps(self) -> list[float]:
        with self.lock:
            return [later - earlier for earlier, later in zip(self.arrivals, self.arrivals[1:], strict=False)]


class _Handler(BaseHTTPRequestHandler):
    server_state: Overloaded
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        state = self.server_state
        with state.lock:
            state.arrivals.append(time.monotonic())
            number = len(state.arrivals)
        payload = json.dumps(BUSY).encode()
        self.send_response(503)
        if number == state.retry_after_on:
            self.send_header("Retry-After", state.retry_after)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def overloaded() -> Iterator[tuple[str, Overloaded]]:
    state = Overloaded()
    with serving(type("Handler", (_Handler,), {"server_state": state})) as url:
        yield url, state


def _read_failing(url: str, retries: int) -> str:
    settings = PrometheusSettings.model_validate({"url": url, "retries": retries, "retry_backoff_s": BACKOFF_S})
    source = PrometheusSource.from_settings(settings, {})
    with pytest.raises(MetricsUnavailable) as failed:
        source.newest("a", "sum(x)", NOW)
    return failed.value.reason


def _assert_waits(gaps: list[float], expected: list[float]) -> None:
    assert len(gaps) == len(expected), gaps
    for gap, wait in zip(gaps, expected, strict=True):
        assert wait <= gap < wait + SLACK_S, (gaps, expected)


def test_the_first_retry_is_sent_at_once_and_each_later_wait_doubles(overloaded: tuple[str, Overloaded]) -> None:
    url, state = overloaded
    reason = _read_failing(url, retries=3)
    assert "tried 4 times" in reason, reason
    _assert_waits(state.gaps(), [0.0, 2 * BACKOFF_S, 4 * BACKOFF_S])


def test_a_retry_after_the_server_sends_is_waited_instead_of_the_back_off(overloaded: tuple[str, Overloaded]) -> None:
    url, state = overloaded
    state.retry_after_on = 1
    _read_failing(url, retries=2)
    _assert_waits(state.gaps(), [1.0, 2 * BACKOFF_S])


def test_the_documentation_says_the_waits_measured() -> None:
    doc = FIELDS["PrometheusSettings.retry_backoff_s"]
    assert "the first retry is sent at once" in doc and "the second after twice this" in doc, doc
    assert "Retry-After" in doc, doc
