"""A query that timed out waiting for a free slot in Prometheus' query queue is retried; one that timed out
evaluating is not. Prometheus runs at most ``--query.max-concurrency`` queries at once (default 20) and answers a
query that waited its whole timeout for a slot with 503 ``errorType: timeout``, "query timed out in query queue"
(promql/engine.go, ``contextErr(err, "query queue")``; the same errorType as "query timed out in expression
evaluation"). The server was busy for a moment, not the query too heavy: the next try may find a slot. Retried
within the read's deadline; if every try still finds the queue full, the class says Prometheus was busy and what
to raise, not to simplify the query. A small local HTTP server stands in for Prometheus and records every request;
the real prometheus-api-client and requests session talk to it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from agent.sources.base import read_deadline
from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from config import settings_from_mapping
from models import DemandClass
from tests.fakes.http_server import serving

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
STEP = timedelta(minutes=5)
CLASSES = ["team-a", "team-b"]
RETRIES = 2
QUEUED_OUT = {"status": "error", "errorType": "timeout", "error": "query timed out in query queue"}
EVALUATED_OUT = {"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"}


@dataclass
class Queue:
    """Answers the next ``busy`` queries of ``culprit`` with ``answer`` (HTTP 503), then as a healthy server."""

    culprit: str = CLASSES[0]
    busy: int = 0
    answer: dict[str, str] = field(default_factory=lambda: QUEUED_OUT)
    queries: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def asked(self, name: str) -> int:
        with self.lock:
            return sum(1 for query in self.queries if f'"{name}"' in query)


class _Handler(BaseHTTPRequestHandler):
    queue: Queue
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlparse(self.path)
        args = {k: v[-1] for k, v in parse_qs(url.query).items()}
        query, queue = args.get("query", ""), self.queue
        with queue.lock:
            queue.queries.append(query)
            busy = f'"{queue.culprit}"' in query and queue.busy > 0
            queue.busy -= busy
        if busy:
            self._reply(503, queue.answer)
        elif url.path == "/api/v1/query":
            sample = {"metric": {}, "value": [NOW.timestamp(), "4"]}
            self._reply(200, {"status": "success", "data": {"resultType": "vector", "result": [sample]}})
        else:
            start, end, step = (int(args[k]) for k in ("start", "end", "step"))
            result = [{"metric": {}, "values": [[t, "4"] for t in range(start, end + 1, step)]}]
            self._reply(200, {"status": "success", "data": {"resultType": "matrix", "result": result}})

    def _reply(self, code: int, body: object) -> None:
        payload = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def prometheus() -> Iterator[tuple[str, Queue]]:
    queue = Queue()
    with serving(type("Handler", (_Handler,), {"queue": queue})) as url:
        yield url, queue


def _missing(url: str, backoff_s: float = 0.0) -> dict[str, str]:
    pools = [
        {"id": f"{name}-pool", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4,
         "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": [name]}
        for name in CLASSES
    ]  # fmt: skip
    raw: dict[str, Any] = {
        "demand_classes": [{"name": name} for name in CLASSES],
        "pools": pools,
        "prometheus": {"url": url, "timeout": "5s", "retries": RETRIES, "retry_backoff_s": backoff_s},
    }
    settings = settings_from_mapping(raw, source="test config")
    assert settings.prometheus is not None
    source = PrometheusSource.from_settings(
        settings.prometheus, demand_queries(settings.demand_class_models(), settings.prometheus)
    )
    _, missing = source.fetch_each([DemandClass(name) for name in CLASSES], NOW - timedelta(hours=1), NOW, STEP)
    return {name: exc.reason for name, exc in missing.items()}


def test_a_query_that_timed_out_in_the_queue_is_asked_again_and_read(prometheus: tuple[str, Queue]) -> None:
    url, queue = prometheus
    queue.busy = 1
    assert _missing(url) == {}
    assert queue.asked(CLASSES[0]) == 2 and queue.asked(CLASSES[1]) == 1


def test_a_queue_still_full_after_the_retries_says_prometheus_was_busy(prometheus: tuple[str, Queue]) -> None:
    url, queue = prometheus
    queue.busy = 10
    reason = _missing(url)[CLASSES[0]]
    assert reason.startswith(
        'Prometheus was busy (HTTP 503, tried 3 times): errorType timeout, "query timed out in query queue": its '
        "query queue was full, the query waiting its whole timeout for a free slot while --query.max-concurrency "
        "queries ran (default 20); read again at the next tick. If it lasts, raise Prometheus' "
        "--query.max-concurrency or lighten the other queries it runs (dashboards, rules)"
    ), reason
    assert "simplify the query" not in reason
    assert queue.asked(CLASSES[0]) == 1 + RETRIES


def test_a_queue_full_until_the_read_deadline_says_prometheus_was_busy(prometheus: tuple[str, Queue]) -> None:
    url, queue = prometheus
    queue.busy = 10
    # The second retry would wait 30 s, beyond the 2 s left for reading: the retries end with the answer in hand.
    with read_deadline(timedelta(seconds=2)):
        reason = _missing(url, backoff_s=30.0)[CLASSES[0]]
    assert reason.startswith("Prometheus was busy (HTTP 503, tried 2 times)"), reason
    assert "--query.max-concurrency" in reason
    assert queue.asked(CLASSES[0]) == 2


def test_a_query_that_timed_out_evaluating_is_still_asked_once(prometheus: tuple[str, Queue]) -> None:
    url, queue = prometheus
    queue.busy, queue.answer = 10, EVALUATED_OUT
    reason = _missing(url)[CLASSES[0]]
    assert reason.startswith("Prometheus could not finish the query within its timeout (HTTP 503)"), reason
    assert "simplify the query" in reason and "Prometheus was busy" not in reason
    assert queue.asked(CLASSES[0]) == 1
