"""A resource check that Prometheus could not finish in time says so in Prometheus' own words, as the range and
instant demand reads do.

The check's instant queries went through prometheus-api-client's ``custom_query``, whose failed answer is only
"HTTP Status Code 503 (b'...')": the warning read "Prometheus answered with a server error (HTTP 503) after the
configured retries", though Prometheus had said it timed out evaluating the query and no retry was made. They are
now read as the demand reads are (``get_instant``), so the warning quotes Prometheus' ``errorType`` and ``error``
and says what to do.

A real Prometheus runs out of time on every query, whatever the machine's speed: its remote-read store (a local
server that never answers) is asked for recent data too (``read_recent``), so selecting the series takes the whole
query timeout (the ``timeout`` parameter, 200 ms here); the store's failure is only a warning (storage/fanout.go),
and the evaluation that follows finds the time up and answers 503 ``errorType: timeout``, "query timed out in
expression evaluation" (promql/engine.go ``contextDone``, web/api/v1/api.go ``returnAPIError``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler

import pytest

from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_client import connect
from agent.sources.resource_check import CHECK, seen_query, unknown_resources
from config.prometheus import PrometheusSettings
from models import DemandClass, MetricsUnavailable
from tests.fakes.http_server import serving
from tests.prometheus.server import PrometheusServer, prometheus_available

pytestmark = pytest.mark.xdist_group("prometheus")
AT = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
LOOKBACK = timedelta(days=7)
QUERY_TIMEOUT = timedelta(milliseconds=200)
PROMETHEUS_SAID = 'errorType timeout, "query timed out in expression evaluation"'


class _NeverAnswers(BaseHTTPRequestHandler):
    """A remote-read endpoint (POST /api/v1/read) that holds every request well past the query timeout."""

    def do_POST(self) -> None:
        time.sleep(2)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def slow_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    assert prometheus_available(), "prometheus and promtool must be on PATH (Debian package `prometheus`)"
    work = tmp_path_factory.mktemp("prometheus-slow-store")
    (work / "data").mkdir()
    with serving(_NeverAnswers) as store:
        remote_read = f"remote_read:\n  - url: {store}/api/v1/read\n    read_recent: true\n"
        server = PrometheusServer(work / "data", work, extra_config=remote_read)
        server.start()
        try:
            yield server
        finally:
            server.stop()


def _source(server: PrometheusServer) -> PrometheusSource:
    settings = PrometheusSettings.model_validate({"url": server.url, "retries": 1})
    return PrometheusSource(connect(settings), {}, settings.max_staleness, query_timeout=QUERY_TIMEOUT)


def test_a_resource_check_prometheus_timed_out_is_logged_in_prometheus_words(
    slow_prometheus: PrometheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    settings = PrometheusSettings.model_validate({"url": slow_prometheus.url})
    classes = [DemandClass("team-a"), DemandClass("team-b")]
    assert unknown_resources(_source(slow_prometheus), classes, settings, AT, LOOKBACK) == []
    (record,) = [r for r in caplog.records if "could not check the resource" in r.getMessage()]
    assert record.getMessage().endswith(
        "could not check the resource nvidia_com_gpu of class(es) team-a, team-b: Prometheus could not finish the "
        f"query within its timeout (HTTP 503): {PROMETHEUS_SAID}; not retried, as it would time out again: simplify "
        "the query (a shorter range, fewer series), or raise prometheus.timeout (the query's timeout sent to "
        "Prometheus) and, above it, Prometheus' --query.timeout (default 2m)"
    ), record.getMessage()


def test_the_instant_query_says_what_the_range_read_says(slow_prometheus: PrometheusServer) -> None:
    source, query = _source(slow_prometheus), seen_query("nvidia_com_gpu", LOOKBACK)
    with pytest.raises(MetricsUnavailable) as instant:
        source.instant(CHECK, query, AT)
    with pytest.raises(MetricsUnavailable) as ranged:
        source.series(CHECK, query, AT - timedelta(hours=1), AT, timedelta(minutes=5))
    assert instant.value.reason == ranged.value.reason
    assert PROMETHEUS_SAID in instant.value.reason, instant.value.reason
