"""The tick's demand now against a real Prometheus: the newest sample at the tick's time, not the newest point of
the 5-minute forecast grid, which can be up to a step older than the tick.

The server holds Kueue gauges scraped every minute (the default ``kueue`` demand queries read them). At 10:02, two
minutes after the grid point 10:00, a burst of 32 GPUs of jobs is queued on ``train``; the tick runs at 10:03. The
grid of a window ending at the tick ends at 10:00, before the burst; Prometheus has the burst's samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actuators import SimulatedCluster
from agent.daemon.demand_recorder import demand_recorder
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify.recording import RecordingNotifier
from agent.sources.base import MetricSource
from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from config import settings_from_mapping
from config.schema import Settings
from forecasting.factory import build_forecaster
from models import DemandClass, SkipReason
from models.clock import SimulatedClock
from tests.prometheus.server import PrometheusServer, serving_openmetrics

pytestmark = pytest.mark.xdist_group("prometheus")
GRID = datetime(2025, 3, 3, 10, 0, tzinfo=UTC)  # a point of the 5-minute grid
TICK = GRID + timedelta(minutes=3)
BURST_AT = GRID + timedelta(minutes=2)
SCRAPE = timedelta(minutes=1)
RESERVED, BURST = 16.0, 32.0
NOMINAL_QUOTA = 64.0
# Per ClusterQueue: the reservation, the pending work at each scrape, and when its collector stopped reporting.
#   train:  16 reserved; 32 GPUs queued from 10:02 on; scraped until the tick.
#   serve:  8 reserved; its last scrape was at 9:57, 6 minutes before the tick (Prometheus runs with a 4-minute
#           lookback, so it has no value at the tick; the 10:00 grid point still holds 9:57's sample).
#   glitch: 8 reserved until a broken exporter reports -8 from 10:02 on.
SERIES: dict[str, tuple[float, float, float, timedelta]] = {
    #        reserved before, reserved from BURST_AT, pending from BURST_AT, last scrape after GRID
    "train": (RESERVED, RESERVED, BURST, timedelta(minutes=3)),
    "serve": (8.0, 8.0, 0.0, timedelta(minutes=-3)),
    "glitch": (8.0, -8.0, 0.0, timedelta(minutes=3)),
}


def _openmetrics() -> str:
    first = GRID - timedelta(hours=3)
    lines = ["# TYPE kueue_cluster_queue_resource_reservation gauge\n"]
    pending = ["# TYPE kueue_cluster_queue_resource_pending gauge\n"]
    # Each ClusterQueue's nominal quota, 64 GPUs, leaves room for its pending work; each is active.
    quota = ["# TYPE kueue_cluster_queue_nominal_quota gauge\n"]
    status = ["# TYPE kueue_cluster_queue_status gauge\n"]
    for queue, (before, after, queued, last) in SERIES.items():
        usage = f'cohort="",cluster_queue="{queue}",flavor="default",resource="nvidia.com/gpu",replica_role="leader"'
        waiting = f'cluster_queue="{queue}",resource="nvidia.com/gpu",replica_role="leader"'
        active = f'cluster_queue="{queue}",status="active",replica_role="leader"'
        at = first
        while at <= GRID + last:
            late = at >= BURST_AT
            stamp = int(at.timestamp())
            lines.append(f"kueue_cluster_queue_resource_reservation{{{usage}}} {after if late else before:g} {stamp}\n")
            pending.append(f"kueue_cluster_queue_resource_pending{{{waiting}}} {queued if late else 0.0:g} {stamp}\n")
            quota.append(f"kueue_cluster_queue_nominal_quota{{{usage}}} {NOMINAL_QUOTA:g} {stamp}\n")
            status.append(f"kueue_cluster_queue_status{{{active}}} 1 {stamp}\n")
            at += SCRAPE
    return "".join(lines + pending + quota + status) + "# EOF\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    with serving_openmetrics(_openmetrics(), tmp_path_factory.mktemp("prometheus-now")) as server:
        yield server


def _settings(server: PrometheusServer) -> Settings:
    pools = [
        {"id": f"{name}-pool", "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8, "min_units": 0,
         "max_units": 20, "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": [name]}
        for name in SERIES
    ]  # fmt: skip
    config: dict[str, Any] = {
        "demand_classes": [{"name": name} for name in SERIES],
        "pools": pools,
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "15m"},
        "loop": {"tick_interval": "1m"},
        "ledger": {"backend": "memory"},
        "prometheus": {"url": server.url, "retries": 0, "demand_metrics": "kueue"},
    }
    return settings_from_mapping(config, source="test config")


def _source(settings: Settings) -> PrometheusSource:
    assert settings.prometheus is not None
    classes = settings.demand_class_models()
    return PrometheusSource.from_settings(settings.prometheus, demand_queries(classes, settings.prometheus))


def _agent(settings: Settings, source: MetricSource | None = None) -> Agent:
    source = source or _source(settings)
    clock = SimulatedClock(TICK)
    cluster = SimulatedCluster(settings.pool_specs(), clock, {f"{name}-pool": 2 for name in SERIES})
    parts = AgentParts(source, build_forecaster(settings.forecast), cluster, InMemoryLedger(), RecordingNotifier())
    return Agent(settings, parts, holder="test")


def test_the_tick_sees_a_burst_queued_after_the_newest_grid_point(server: PrometheusServer) -> None:
    settings = _settings(server)
    agent = _agent(settings)
    grid = agent.parts.source.fetch([DemandClass("train")], TICK - timedelta(hours=1), TICK, agent.step)
    assert grid["ds"].iloc[-1] == GRID and grid["y"].iloc[-1] == RESERVED  # the grid has not seen the burst yet

    report = agent.run_once(TICK)

    assert report.observed["train"] == RESERVED + BURST
    forecast = report.forecasts["train"]
    assert forecast.last_observed == RESERVED + BURST
    # The model still forecasts from the grid: persistence repeats the newest grid value, 10:00's.
    assert set(forecast.quantiles[0.9]) == {RESERVED}
    # The queued burst is the planner's floor: 48 GPUs are 6 nodes of 8, at once rather than a step later.
    decision = report.plan.decisions["train-pool"]
    assert report.plan.targets["train-pool"] == math.ceil((RESERVED + BURST) / 8), decision.why()


def test_a_class_without_a_sample_at_the_tick_keeps_the_newest_grid_value(server: PrometheusServer) -> None:
    report = _agent(_settings(server)).run_once(TICK)
    # serve's collector stopped at 9:57: Prometheus has no value at 10:03, and that is not zero demand; the 10:00
    # grid point (9:57's sample) covers 10:00-10:05 and is fresh, as before.
    assert report.observed["serve"] == 8.0
    assert "serve" not in report.problems


def test_an_implausible_newest_sample_holds_the_class(server: PrometheusServer) -> None:
    report = _agent(_settings(server)).run_once(TICK)
    # The 10:00 grid point is a plausible 8, but the newest sample is -8: it is not a demand, and an older value
    # does not stand in for it.
    assert "glitch" not in report.observed
    assert "not a demand" in report.problems["glitch"]
    holds = [s for s in report.plan.skips if s.pool_id == "glitch-pool"]
    assert [s.reason for s in holds] == [SkipReason.MISSING_DATA]


def test_a_dry_run_daemon_reads_the_demand_now_through_its_demand_recorder(server: PrometheusServer) -> None:
    settings = _settings(server)
    recorder = demand_recorder(_source(settings))  # what the dry-run daemon wraps its source in
    report = _agent(settings, recorder).run_once(TICK)
    assert report.observed["train"] == RESERVED + BURST
    assert recorder.newest_step(TICK) == {"train": RESERVED, "serve": 8.0, "glitch": 8.0}  # the grid, as before


def test_the_source_reads_each_class_at_the_tick(server: PrometheusServer) -> None:
    settings = _settings(server)
    classes = settings.demand_class_models()
    readings, failed = _source(settings).newest_each(classes, TICK)
    assert readings["train"] == (TICK, RESERVED + BURST)
    assert readings["glitch"] == (TICK, -8.0)  # read as Prometheus answers it; the loop judges it
    assert list(failed) == ["serve"]
    assert failed["serve"].demand_class == "serve"
    assert "no value" in failed["serve"].reason


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("kueue_cluster_queue_resource_reservation", "several series"),
        ("scalar(sum(kueue_cluster_queue_resource_reservation))", "not an instant vector"),
        ("sum(rate(", "could not run the query"),
    ],
)
def test_a_demand_now_that_is_not_one_series_is_unavailable(server: PrometheusServer, query: str, reason: str) -> None:
    prometheus = _settings(server).prometheus
    assert prometheus is not None
    source = PrometheusSource.from_settings(prometheus, {"gpu": query})
    readings, failed = source.newest_each([DemandClass("gpu")], TICK)
    assert readings == {}
    assert reason in failed["gpu"].reason
    assert failed["gpu"].query == query
