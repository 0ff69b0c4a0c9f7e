"""The fake Prometheus answers instant queries (``/api/v1/query``) as Prometheus documents them, so the demand a
tick reads at its instant (``PrometheusSource.newest_each``) goes the way it goes against a real server: the real
prometheus-api-client and ``PrometheusSource`` read the value, and a live tick on the fakes reads each class's demand
now without a failed request (before, the fake answered 404 and every tick fell back on the grid's newest step)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from kubernetes import client as k8s
from prometheus_api_client import PrometheusConnect

from agent.notify import RecordingNotifier
from agent.sources.prometheus import PrometheusSource
from config.prometheus import PrometheusSettings
from models import DemandClass, MetricsUnavailable
from models.clock import SimulatedClock
from tests.e2e.rig import CLASS, ON_DEMAND, T0, NodeMirror, Rig, live_agent
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

QUERY = 'sum(demand{namespace="train"})'
AT = datetime(2026, 3, 2, 9, 0, 30, 250_000, tzinfo=UTC)


class _Recording(FakePrometheusApi):
    """The fake, recording the path and status of each request."""

    def __init__(self) -> None:
        super().__init__()
        self.answered: list[tuple[str, str, int]] = []

    def respond(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        status, payload = super().respond(method, path, headers, body)
        self.answered.append((method, path.split("?", maxsplit=1)[0], status))
        return status, payload


@pytest.fixture
def fake() -> Iterator[FakePrometheusApi]:
    api = FakePrometheusApi().start()
    try:
        yield api
    finally:
        api.stop()


def test_the_client_reads_an_instant_vector_at_the_given_time_or_now(fake: FakePrometheusApi) -> None:
    fake.set_demand("train", 8.5)
    client = PrometheusConnect(url=fake.url)

    assert client.custom_query(QUERY, params={"time": "1772442030.25"}) == [
        {"metric": {}, "value": [1772442030.25, "8.5"]}
    ]
    assert client.custom_query(QUERY, params={"time": "2026-03-02T09:00:30Z"}) == [
        {"metric": {}, "value": [1772442030, "8.5"]}
    ]
    before = time.time()
    [sample] = client.custom_query(QUERY)  # no time: the server's current time
    assert before - 0.001 <= sample["value"][0] <= time.time() + 0.001
    assert sample["value"][1] == "8.5"
    assert client.custom_query('sum(demand{namespace="other"})') == []  # no series, never 0
    assert client.custom_query("vector(1)", params={"time": "100"}) == [{"metric": {}, "value": [100, "1"]}]

    posted = requests.post(f"{fake.url}/api/v1/query", data={"query": QUERY, "time": "100"}, timeout=5)
    assert posted.status_code == 200
    assert posted.json() == {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [100, "8.5"]}]},
    }
    assert fake.queries.count(QUERY) == 4


def test_the_source_reads_demand_now_from_the_fake(fake: FakePrometheusApi) -> None:
    fake.set_demand("train", 16)
    settings = PrometheusSettings.model_validate({"url": fake.url, "retries": 0})
    source = PrometheusSource.from_settings(settings, {"train": QUERY})

    assert source.newest("train", QUERY, AT) == (AT, 16.0)
    readings, unread = source.newest_each([DemandClass("train")], AT)
    assert (readings, unread) == ({"train": (AT, 16.0)}, {})


def test_an_instant_query_of_a_set_result_gets_its_newest_sample_within_the_lookback_delta(
    fake: FakePrometheusApi,
) -> None:
    at = int(AT.timestamp())
    series = {"metric": {}, "values": [[at - 600, "3"], [at - 30, "20"], [at + 60, "99"]]}
    fake.set_result("train", [series])
    settings = PrometheusSettings.model_validate({"url": fake.url, "retries": 0})
    source = PrometheusSource.from_settings(settings, {"train": QUERY})

    assert source.newest("train", QUERY, AT) == (AT, 20.0)  # not the older 3, nor the 99 after AT
    later = AT + timedelta(minutes=5, seconds=59)  # the 99 (at AT + 60 s) is 4 min 59 s old: within the lookback
    assert source.newest("train", QUERY, later) == (later, 99.0)
    with pytest.raises(MetricsUnavailable, match="no sample within its lookback delta"):
        source.newest("train", QUERY, AT + timedelta(minutes=6, seconds=1))  # the 99 is 5 min 1 s old

    fake.set_result("train", [{"metric": {}, "values": [[at - 30, "24", "extra"]]}])
    with pytest.raises(MetricsUnavailable, match="malformed answer from Prometheus"):
        source.newest("train", QUERY, AT)  # a malformed matrix is served as it is


def test_a_live_tick_reads_each_class_demand_now_without_a_failed_request(
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    prometheus = _Recording()
    prometheus.start()
    try:
        rig = Rig(gke_api, kube_api, prometheus, SimulatedClock(T0), NodeMirror(gke_api, kube_api), tmp_path)
        rig.add_pools(on_demand_nodes=1)
        rig.prometheus.set_demand(CLASS, 8)
        agent = live_agent(rig, rig.settings(spot_max=0), kube_client, RecordingNotifier())
        caplog.set_level(logging.WARNING, logger="agent.demand_reads")

        report = agent.run_once(rig.clock.now())

        assert report.observed == {CLASS: 8.0}
        assert report.problems == {}
        assert ("GET", "/api/v1/query", 200) in prometheus.answered
        assert [(p, s) for _, p, s in prometheus.answered if s != 200] == []
        unread = [r.getMessage() for r in caplog.records if "demand now not read" in r.getMessage()]
        assert unread == []
        assert rig.mirror.nodes(ON_DEMAND)  # the pool is still there: nothing read wrongly as zero
    finally:
        prometheus.stop()
