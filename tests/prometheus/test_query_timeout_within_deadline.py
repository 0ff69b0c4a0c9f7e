"""The query's timeout sent to Prometheus (the ``timeout`` parameter of /api/v1/query and /api/v1/query_range) is cut
to the time left before the read deadline, for the first try and for every retry: sent whole (prometheus.timeout,
5000ms here), Prometheus went on evaluating a query the client had given up on at the deadline. It is sent in whole
milliseconds rounded down, as ``prometheus_duration`` sends it, and never as zero. A local server on 127.0.0.1
records the timeout each request carries and when it came; the real prometheus-api-client and requests session talk
to it, nothing of the client is mocked."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import pytest

from agent.sources.base import read_deadline
from agent.sources.prometheus import PROBE_QUERY, PrometheusSource
from agent.sources.prometheus_client import query_timeout_within_deadline
from config.prometheus import PrometheusSettings
from models import DemandClass, MetricsUnavailable
from tests.fakes.http_server import reply_json, serving

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
QUERY = "sum(gpu_demand)"
DEADLINE_S = 1.0
BUSY = {"status": "error", "errorType": "unavailable", "error": "too many outstanding requests"}
# How much later than the client's send a request may reach the server, on a busy machine.
TRANSIT_S = 0.05


@dataclass
class Recorder:
    """Answers each query (``busy``: 503 unavailable after ``delay_s``, retried; else a sample at once) and records
    when each came (monotonic), its query and the ``timeout`` it carried."""

    busy: bool = True
    delay_s: float = 0.2
    requests: list[tuple[float, str, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def tries(self) -> list[tuple[float, str | None]]:
        with self.lock:
            return [(at, timeout) for at, query, timeout in self.requests if query == QUERY]


class _Handler(BaseHTTPRequestHandler):
    recorder: Recorder
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlparse(self.path)
        args = {k: v[-1] for k, v in parse_qs(url.query).items()}
        with self.recorder.lock:
            self.recorder.requests.append((time.monotonic(), args.get("query", ""), args.get("timeout")))
        if self.recorder.busy and args.get("query") != PROBE_QUERY:
            time.sleep(self.recorder.delay_s)
            self._reply(503, BUSY)
        elif url.path == "/api/v1/query":
            sample = {"metric": {}, "value": [float(args.get("time", 0)), "4"]}
            self._reply(200, {"status": "success", "data": {"resultType": "vector", "result": [sample]}})
        else:
            start, end, step = (int(args[k]) for k in ("start", "end", "step"))
            result = [{"metric": {}, "values": [[t, "4"] for t in range(start, end + 1, step)]}]
            self._reply(200, {"status": "success", "data": {"resultType": "matrix", "result": result}})

    def _reply(self, code: int, body: object) -> None:
        reply_json(self, code, body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def recorder() -> Iterator[tuple[str, Recorder]]:
    state = Recorder()
    with serving(type("Handler", (_Handler,), {"recorder": state})) as url:
        yield url, state


def _source(url: str) -> PrometheusSource:
    settings = PrometheusSettings.model_validate({"url": url, "timeout": "5s", "retries": 3, "retry_backoff_s": 0})
    return PrometheusSource.from_settings(settings, {"a": QUERY})


def _demand_now(source: PrometheusSource) -> dict[str, MetricsUnavailable]:
    return source.newest_each([DemandClass("a")], NOW)[1]


def _history(source: PrometheusSource) -> dict[str, MetricsUnavailable]:
    return source.fetch_each([DemandClass("a")], NOW - timedelta(hours=1), NOW, timedelta(minutes=5))[1]


def _ms(timeout: str | None) -> int:
    assert timeout is not None and timeout.endswith("ms") and timeout[:-2].isdigit(), timeout
    return int(timeout[:-2])


@pytest.mark.parametrize("read", [_demand_now, _history], ids=["instant query", "range query"])
def test_each_try_sends_at_most_the_time_left_as_the_query_timeout(
    recorder: tuple[str, Recorder], read: Callable[[PrometheusSource], dict[str, MetricsUnavailable]]
) -> None:
    url, state = recorder
    source = _source(url)
    by = time.monotonic() + DEADLINE_S
    with read_deadline(timedelta(seconds=DEADLINE_S)):
        missing = read(source)

    assert "a" in missing
    tries = state.tries()
    assert len(tries) >= 3, tries  # the first try and retries, each 0.2 s
    for at, timeout in tries:
        left_ms = (by - at) * 1000
        # the time left when the try was sent: at most what was left when it came, and not much more than that
        assert 0 < _ms(timeout) <= left_ms + TRANSIT_S * 1000, (timeout, left_ms)
        assert _ms(timeout) >= left_ms - 100, (timeout, left_ms)
    assert [_ms(t) for _, t in tries] == sorted((_ms(t) for _, t in tries), reverse=True)


@pytest.mark.parametrize("deadline_s", [None, 6.0], ids=["without a deadline", "a deadline longer than it"])
def test_the_configured_timeout_is_sent_when_as_much_is_left(
    recorder: tuple[str, Recorder], deadline_s: float | None
) -> None:
    url, state = recorder
    state.busy = False
    with read_deadline(None if deadline_s is None else timedelta(seconds=deadline_s)):
        readings, missing = _source(url).newest_each([DemandClass("a")], NOW)
    assert missing == {} and readings["a"][1] == 4.0
    assert [timeout for _, timeout in state.tries()] == ["5000ms"]


def _sent(url: str) -> str:
    """The ``timeout`` parameter of ``url`` once cut to the time left."""
    return parse_qs(urlparse(query_timeout_within_deadline(url)).query)["timeout"][0]


def test_the_timeout_sent_is_never_zero_nor_negative_and_nothing_else_changes() -> None:
    url = "/api/v1/query?query=sum%28x%29&time=1772452800&timeout=5000ms"
    assert query_timeout_within_deadline(url) == url  # outside a deadline
    with read_deadline(timedelta(seconds=2.5)):
        cut = query_timeout_within_deadline(url)
        assert cut.startswith("/api/v1/query?query=sum%28x%29&time=1772452800&timeout=")
        assert 2400 <= _ms(_sent(url)) <= 2500, cut
        probe = "/api/v1/query?query=vector%281%29"
        assert query_timeout_within_deadline(probe) == probe  # no timeout, none added
        # Prometheus also takes seconds as a number, and units: each is cut the same way
        assert 2400 <= _ms(_sent("/q?timeout=30&query=x")) <= 2500
        assert 2400 <= _ms(_sent("/q?timeout=1m30s")) <= 2500
        assert _sent("/q?timeout=2s") == "2s"  # less than the time left: as it was
    with read_deadline(timedelta(seconds=-1)):  # the deadline has passed
        assert _sent(url) == "1ms"
