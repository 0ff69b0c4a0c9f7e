"""A Prometheus front end asking the client to come back later (a query-frontend or proxy answering 429 or 503 with
``Retry-After``), or a back-off between retries, never holds a read past its deadline: a wait that would reach the
deadline ends the retries with the answer in hand. urllib3 slept the whole ``Retry-After``: 20 s inside a read
deadline of 3 s, then asked again. A small local HTTP server stands in for the front end and records every request;
the real prometheus-api-client and requests session talk to it. Counted are requests, not seconds: the retry the
wait led to is the one that is no longer sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import pytest

from agent.sources.base import read_deadline
from agent.sources.prometheus import PROBE_QUERY, PrometheusSource
from config.prometheus import PrometheusSettings
from models import DemandClass
from tests.fakes.http_server import serving

NOW = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
# Mimir's query-frontend answers a full queue with 429 "too many outstanding requests" (grafana/mimir pull request
# 16503 adds Retry-After to its 429 and 503 answers); RFC 9110 section 10.2.3 defines Retry-After in seconds.
BUSY = {"status": "error", "errorType": "unavailable", "error": "too many outstanding requests"}


@dataclass
class Front:
    status: int = 503
    retry_after: str | None = "20"
    queries: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def asked(self, query: str) -> int:
        with self.lock:
            return self.queries.count(query)


class _Handler(BaseHTTPRequestHandler):
    front: Front
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        query = {k: v[-1] for k, v in parse_qs(urlparse(self.path).query).items()}.get("query", "")
        with self.front.lock:
            self.front.queries.append(query)
        payload = json.dumps(BUSY).encode()
        self.send_response(self.front.status)
        if self.front.retry_after is not None:
            self.send_header("Retry-After", self.front.retry_after)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def front() -> Iterator[tuple[str, Front]]:
    state = Front()
    with serving(type("Handler", (_Handler,), {"front": state})) as url:
        yield url, state


def _read(url: str, **settings: object) -> dict[str, str]:
    source = PrometheusSource.from_settings(
        PrometheusSettings.model_validate({"url": url, "retries": 2, **settings}), {"a": "sum(x)", "b": "sum(y)"}
    )
    with read_deadline(timedelta(seconds=3)):
        readings, missing = source.newest_each([DemandClass("a"), DemandClass("b")], NOW)
    assert readings == {}
    return {name: exc.reason for name, exc in missing.items()}


@pytest.mark.parametrize("status", [503, 429])
def test_a_retry_after_beyond_the_deadline_ends_the_retries(front: tuple[str, Front], status: int) -> None:
    url, state = front
    state.status = status
    missing = _read(url, retry_backoff_s=0)
    # One try of the first class (no second one after a 20 s wait) and the probe; the other class is not asked.
    assert state.asked("sum(x)") == 1 and state.asked(PROBE_QUERY) == 1 and state.asked("sum(y)") == 0
    assert f"HTTP {status}" in missing["a"]
    assert missing["b"].startswith(f"not queried: Prometheus at {url} is failing")


def test_a_back_off_beyond_the_deadline_ends_the_retries(front: tuple[str, Front]) -> None:
    url, state = front
    state.retry_after = None
    _read(url, retry_backoff_s=3)  # urllib3 waits 0 s before the second try, 3 x 2 = 6 s before the third
    assert state.asked("sum(x)") == 2 and state.asked(PROBE_QUERY) == 1


def test_a_short_retry_after_is_waited_for_and_the_retries_run(front: tuple[str, Front]) -> None:
    url, state = front
    state.retry_after = "0"
    _read(url, retry_backoff_s=0)
    assert state.asked("sum(x)") == 3  # the try and both retries
