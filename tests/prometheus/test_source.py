"""PrometheusSource against a real Prometheus loaded with the Helios Earth trace: the values, the chunking and
every untrustworthy answer the server itself can give."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_client import connect
from agent.sources.prometheus_queries import demand_queries
from agent.sources.prometheus_samples import step_grid
from config.prometheus import PrometheusSettings
from models import DemandClass, MetricsUnavailable
from tests.prometheus.server import (
    CHECKED_KUEUE_QUEUE,
    LEGACY_KUEUE_QUEUE,
    TENANTS,
    WAITING_ON_CHECKS,
    LoadedTrace,
    PrometheusServer,
)

pytestmark = pytest.mark.xdist_group("prometheus")
STEP = timedelta(minutes=5)
CLASSES = tuple(DemandClass(name=t) for t in TENANTS)


def _source(server: PrometheusServer, **overrides: object) -> tuple[PrometheusSource, PrometheusSettings]:
    settings = PrometheusSettings.model_validate({"url": server.url, "retries": 0, **overrides})
    return PrometheusSource.from_settings(settings, demand_queries(CLASSES, settings)), settings


def _span(loaded: LoadedTrace) -> tuple[datetime, datetime]:
    return loaded.index[0].to_pydatetime(), (loaded.index[-1] + STEP).to_pydatetime()


FLAVOR_SELECTORS = {t: {"selector": f'cluster_queue="{t}", flavor="default"'} for t in TENANTS}


@pytest.mark.parametrize(
    ("demand_metrics", "classes"),
    [("kube-state-metrics", {}), ("kueue", {}), ("kueue", FLAVOR_SELECTORS)],
    ids=["kube-state-metrics", "kueue", "kueue-flavor-selector"],
)
def test_default_queries_read_the_trace_demand_step_for_step(
    prometheus: PrometheusServer, loaded_trace: LoadedTrace, demand_metrics: str, classes: dict[str, object]
) -> None:
    # 21 days at 5 minutes = 6,048 steps per class, read in chunks of 1,000 points. The server holds every series
    # more than once (two kube-state-metrics replicas; Kueue leader and a lagging follower, or one replica scraped
    # twice), and Kueue's pending gauge has no flavor label: running + queued must still come out exactly.
    source, _ = _source(prometheus, demand_metrics=demand_metrics, max_points_per_query=1000, classes=classes)
    start, end = _span(loaded_trace)
    frame = source.fetch(CLASSES, start, end, STEP)
    assert list(frame.columns) == ["unique_id", "ds", "y"]
    for tenant in TENANTS:
        got = frame[frame["unique_id"] == tenant]
        assert got["ds"].tolist() == list(loaded_trace.index)
        want = loaded_trace.demand[tenant]
        np.testing.assert_array_equal(np.isnan(got["y"].to_numpy()), np.isnan(want))  # outages stay NaN
        np.testing.assert_allclose(got["y"].to_numpy(), want, rtol=1e-9, equal_nan=True)
    quiet = frame[frame["unique_id"] == "earth/vcJkd"]["y"]
    assert (quiet == 0.0).sum() > 1000  # no pods at all: zero, because kube-state-metrics / Kueue still report


def test_a_namespace_kube_state_metrics_does_not_report_is_unavailable_not_zero(
    prometheus: PrometheusServer, loaded_trace: LoadedTrace
) -> None:
    # earth/vcJkd has no accelerator pods for most of the trace and reads 0 there (above); the same tenant spelled
    # wrong matches no pods ever, and must not read as a demand of 0 that would drain its pools.
    source, settings = _source(prometheus)
    typo = DemandClass("earth/vcjkd")
    source = PrometheusSource(connect(settings), demand_queries([typo], settings), timedelta(minutes=15))
    end = _span(loaded_trace)[1]
    with pytest.raises(MetricsUnavailable) as caught:
        source.fetch([typo], end - timedelta(days=1), end, STEP)
    assert "no data" in caught.value.reason
    assert "kube-state-metrics reports no namespace" in caught.value.reason
    assert caught.value.demand_class == "earth/vcjkd"


def test_chunk_edges_neither_duplicate_nor_drop_steps(prometheus: PrometheusServer, loaded_trace: LoadedTrace) -> None:
    start = loaded_trace.index[100].to_pydatetime() + timedelta(seconds=150)  # not on the grid
    end = start + timedelta(hours=7, seconds=10)
    whole, _ = _source(prometheus)
    tiny, _ = _source(prometheus, max_points_per_query=7)
    a = whole.fetch(CLASSES[:1], start, end, STEP)
    b = tiny.fetch(CLASSES[:1], start, end, STEP)
    pd.testing.assert_frame_equal(a, b)
    assert a["ds"].is_unique
    assert a["ds"].iloc[0] == loaded_trace.index[101]
    assert len(a) == len(step_grid(start, end, STEP)) == 84


def _pool_defaults() -> tuple[object, ...]:
    from models import AcceleratorFamily, CapacityTier, PoolKind

    return (PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 10, 29.36, STEP, TENANTS)


@pytest.mark.parametrize(
    ("query", "end_shift", "reason"),
    [
        ("sum(leadtime_no_such_metric)", timedelta(0), "no data"),
        ('sum(kueue_cluster_queue_resource_usage{cluster_queue="earth/vc6YE"}) * NaN', timedelta(0), "NaN"),
        ('sum(kueue_cluster_queue_resource_usage{cluster_queue="earth/vc6YE"})', timedelta(hours=2), "stale"),
        ("kueue_cluster_queue_resource_usage", timedelta(0), "several series"),
        ("sum(rate(", timedelta(0), "could not run the query"),
    ],
)
def test_untrustworthy_answers_are_unavailable_not_zero(
    prometheus: PrometheusServer, loaded_trace: LoadedTrace, query: str, end_shift: timedelta, reason: str
) -> None:
    source, settings = _source(prometheus)
    source = PrometheusSource(connect(settings), {"gpu": query}, max_staleness=timedelta(minutes=15))
    end = (loaded_trace.index[-1] + STEP).to_pydatetime() + end_shift
    with pytest.raises(MetricsUnavailable) as caught:
        source.fetch([DemandClass("gpu")], end - timedelta(days=1), end, STEP)
    assert reason in caught.value.reason
    assert caught.value.demand_class == "gpu"
    assert caught.value.query == query
    assert query in str(caught.value)


def test_a_range_above_the_server_point_limit_is_refused_clearly(
    prometheus: PrometheusServer, loaded_trace: LoadedTrace
) -> None:
    source, settings = _source(prometheus)
    unchunked = PrometheusSource(
        connect(settings), demand_queries(CLASSES, settings), timedelta(minutes=15), max_points_per_query=20_000
    )
    start, end = _span(loaded_trace)
    with pytest.raises(MetricsUnavailable, match="too many points"):
        unchunked.fetch(CLASSES[:1], start, end, timedelta(minutes=1))  # 30,240 points in one query
    assert len(source.fetch(CLASSES[:1], start, end, timedelta(minutes=1))) == 30_240  # chunked: fine


def test_an_outage_at_the_end_reads_as_stale(prometheus: PrometheusServer, loaded_trace: LoadedTrace) -> None:
    # The trace's collector was down all of 2020-05-10 (UTC+8): asking at noon that day finds only old values.
    source, _ = _source(prometheus)
    at = datetime(2020, 5, 10, 4, 0, tzinfo=UTC)
    with pytest.raises(MetricsUnavailable, match="stale"):
        source.fetch(CLASSES[:1], at - timedelta(days=1), at, STEP)
    frame = source.fetch(CLASSES[:1], at - timedelta(days=1), at - timedelta(hours=12), STEP)
    assert frame["y"].notna().all()


def test_one_class_without_data_does_not_hide_the_others(
    prometheus: PrometheusServer, loaded_trace: LoadedTrace
) -> None:
    _, settings = _source(prometheus)
    queries = {**demand_queries(CLASSES, settings), "earth/vcMod": "sum(leadtime_no_such_metric)"}
    source = PrometheusSource(connect(settings), queries, max_staleness=timedelta(minutes=15))
    start, end = _span(loaded_trace)
    frame, missing = source.fetch_each(CLASSES, end - timedelta(days=1), end, STEP)
    assert set(frame["unique_id"]) == {"earth/vc6YE", "earth/vcJkd"}
    assert list(missing) == ["earth/vcMod"]
    assert "no data" in missing["earth/vcMod"].reason
    with pytest.raises(MetricsUnavailable, match="earth/vcMod"):
        source.fetch(CLASSES, start, end, STEP)


def test_kueue_counts_quota_reserved_by_workloads_waiting_on_an_admission_check(
    prometheus: PrometheusServer, loaded_trace: LoadedTrace
) -> None:
    # Workloads that reserved quota and wait for a ProvisioningRequest (GKE's Dynamic Workload Scheduler) are
    # neither admitted (usage) nor pending: they are the work waiting for capacity, and count.
    checked = DemandClass("provisioned", series=CHECKED_KUEUE_QUEUE)
    settings = PrometheusSettings.model_validate({"url": prometheus.url, "retries": 0, "demand_metrics": "kueue"})
    source = PrometheusSource.from_settings(settings, demand_queries([checked], settings))
    _, end = _span(loaded_trace)
    frame = source.fetch([checked], end - timedelta(days=1), end, STEP)
    want = loaded_trace.demand[TENANTS[0]][-len(frame) :] + WAITING_ON_CHECKS
    np.testing.assert_allclose(frame["y"].to_numpy(), want, rtol=1e-9, equal_nan=True)


def test_kueue_without_the_pending_gauge_is_unavailable_not_usage_alone(
    prometheus: PrometheusServer, loaded_trace: LoadedTrace
) -> None:
    # A Kueue older than v0.18.0 reports usage but no pending gauge: queued work would be invisible, so the class
    # is held (and the reason says what to do), instead of reading usage + 0.
    legacy = DemandClass("legacy", series=LEGACY_KUEUE_QUEUE)
    settings = PrometheusSettings.model_validate({"url": prometheus.url, "retries": 0, "demand_metrics": "kueue"})
    source = PrometheusSource.from_settings(settings, demand_queries([legacy], settings))
    _, end = _span(loaded_trace)
    with pytest.raises(MetricsUnavailable, match=r"no data.*kueue_cluster_queue_resource_pending.*v0\.18\.0"):
        source.fetch([legacy], end - timedelta(days=1), end, STEP)


def test_a_fractional_timeout_is_sent_in_a_form_prometheus_parses(
    prometheus: PrometheusServer, loaded_trace: LoadedTrace
) -> None:
    # Prometheus answers 400 bad_data to timeout=2.5s; 2500ms it takes.
    source, settings = _source(prometheus, timeout="2500ms")
    assert settings.timeout == timedelta(milliseconds=2500)
    _, end = _span(loaded_trace)
    assert len(source.fetch(CLASSES[:1], end - timedelta(hours=6), end, STEP)) == 72


def test_an_answer_with_warnings_is_unavailable(
    prometheus: PrometheusServer, prometheus_partial: PrometheusServer
) -> None:
    # The remote-read store behind prometheus_partial is down: Prometheus still answers (local data only) and says
    # so in ``warnings``. The same query on the healthy server is read as usual.
    query = "sum(leadtime_demand_gpus) or vector(3)"
    end = datetime.now(UTC).replace(microsecond=0)
    for server, fails in ((prometheus, False), (prometheus_partial, True)):
        settings = PrometheusSettings.model_validate({"url": server.url, "retries": 0})
        source = PrometheusSource.from_settings(settings, {"gpu": query})
        if fails:
            with pytest.raises(MetricsUnavailable, match=r"warnings.*partial.*remote_read") as caught:
                source.fetch([DemandClass("gpu")], end - timedelta(hours=1), end, STEP)
            assert caught.value.query == query
        else:
            assert source.fetch([DemandClass("gpu")], end - timedelta(hours=1), end, STEP)["y"].eq(3.0).all()
