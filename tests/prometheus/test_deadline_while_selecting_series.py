"""A query whose timeout ran out while Prometheus was still selecting its series is told as a timeout, with what to
do, not as a query Prometheus could not run.

Prometheus 2.42 answers such a query 422 ``errorType: execution``, "expanding series: context deadline exceeded"
(promql/engine.go wraps the storage's error in "expanding series"; web/api/v1/api.go ``returnAPIError`` answers an
error it does not classify with ``errorExec``, 422), not 503 ``errorType: timeout`` as when the time runs out while
it evaluates: seen from the real server loaded with the bundled trace, queried with a 1 ms timeout. The reason said
"Prometheus could not run the query (HTTP 422)", which reads as a query to correct rather than one to lighten or to
give more time. Which of the two answers Prometheus gives depends on where the time runs out, so a small local
HTTP server gives this one every time; the real prometheus-api-client and requests session talk to it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import pytest

from agent.sources.prometheus import PrometheusSource
from config.prometheus import PrometheusSettings
from models import MetricsUnavailable
from tests.fakes.http_server import serving

AT = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
QUERY = 'sum(kube_pod_container_resource_requests{namespace="train", resource="nvidia_com_gpu"})'
SELECTING_TIMED_OUT = {
    "status": "error",
    "errorType": "execution",
    "error": "expanding series: context deadline exceeded",
}
TIMED_OUT = (
    'Prometheus could not finish the query within its timeout (HTTP 422): errorType execution, "expanding series: '
    'context deadline exceeded"; not retried, as it would time out again: simplify the query (a shorter range, fewer '
    "series), or raise prometheus.timeout (the query's timeout sent to Prometheus) and, above it, Prometheus' "
    "--query.timeout (default 2m)"
)


@dataclass
class Asked:
    queries: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    asked: Asked
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        with self.asked.lock:
            self.asked.queries.append(parse_qs(urlparse(self.path).query).get("query", [""])[-1])
        payload = json.dumps(SELECTING_TIMED_OUT).encode()
        self.send_response(422)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def prometheus() -> Iterator[tuple[str, Asked]]:
    asked = Asked()
    with serving(type("Handler", (_Handler,), {"asked": asked})) as url:
        yield url, asked


def test_a_deadline_reached_selecting_series_is_told_as_a_timeout(prometheus: tuple[str, Asked]) -> None:
    url, asked = prometheus
    source = PrometheusSource.from_settings(PrometheusSettings.model_validate({"url": url, "retries": 2}), {})
    with pytest.raises(MetricsUnavailable) as ranged:
        source.series("train", QUERY, AT - timedelta(hours=1), AT, timedelta(minutes=5))
    with pytest.raises(MetricsUnavailable) as instant:
        source.newest("train", QUERY, AT)
    assert ranged.value.reason == TIMED_OUT
    assert instant.value.reason == TIMED_OUT
    assert asked.queries == [QUERY, QUERY]  # one request each: not retried
