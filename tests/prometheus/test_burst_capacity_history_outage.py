"""The on-prem capacity history a paced budget's burst profile is measured above is read once per clock hour. When
kube-state-metrics is down at that read, the pool's newest value is stale and the read fails: the burst of the
whole history was then measured above the pool's ``max_units`` for the hour (a third of it, with 30 of 40 nodes up),
and pacing funded burst the money could not pay for. Now the pool keeps the last history read of it, and is read
again at the next tick whose own capacity read of the pool succeeds, rather than an hour later; the log says which
capacity is used.

On a real Prometheus, loaded with ``promtool tsdb create-blocks-from openmetrics``: ``demand_gpus`` is 360 and
``ready_nodes{pool="onprem"}`` 30 (of 40 8-GPU nodes) at every minute from 27 hours before 12:00 to 14:00, except
that ``ready_nodes`` has no sample from 12:41 to 13:00 (kube-state-metrics down; back at 13:01)."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actuators.simulated import SimulatedCluster
from agent.burst_history import HourlyBurstProfile
from agent.ledger.memory import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.planning.groups import demand_groups
from agent.sources.onprem_capacity import PrometheusOnPremCapacity
from agent.sources.prometheus import PrometheusSource
from config import settings_from_mapping
from config.schema import Settings
from forecasting.factory import build_forecaster
from models.clock import SimulatedClock
from tests.prometheus.server import PrometheusServer, prometheus_available

pytestmark = pytest.mark.xdist_group("prometheus")

NOON = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)  # 396 hours before the period ends (February 1st)
ONE = NOON + timedelta(hours=1)  # the next hourly refresh, kube-state-metrics down since 12:41
ONPREM, SPOT, CLASS = "onprem", "spot", "train"
NODES, UP, DEMAND = 40, 30, 360.0
DOWN = (NOON + timedelta(minutes=41), NOON + timedelta(minutes=60))  # no ready_nodes sample in [12:41, 13:00]
# The burst the cloud served: 360 GPUs above 30 nodes of 8 is 120 an hour. Half of what it needs until the period
# ends, at the spot price of 1 USD a GPU-hour; above the 40 nodes it would be 40 an hour, which the money covers.
CAP_USD = 120.0 * 396 / 2
BURST_ABOVE_READ, BURST_ABOVE_MAX = DEMAND - UP * 8, DEMAND - NODES * 8
QUERY = f'max(ready_nodes{{pool="{ONPREM}"}})'


def _openmetrics() -> str:
    stamps = [NOON + timedelta(minutes=m) for m in range(-27 * 60, 2 * 60 + 1)]
    lines = ["# TYPE demand_gpus gauge\n"]
    lines += [f"demand_gpus {DEMAND:g} {int(t.timestamp())}\n" for t in stamps]
    lines.append("# TYPE ready_nodes gauge\n")
    lines += [
        f'ready_nodes{{pool="{ONPREM}"}} {UP} {int(t.timestamp())}\n' for t in stamps if not DOWN[0] <= t <= DOWN[1]
    ]
    lines.append("# EOF\n")
    return "".join(lines)


@pytest.fixture(scope="module")
def outage_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    if not prometheus_available():
        pytest.fail("prometheus and promtool must be on PATH (Debian package `prometheus`; `make prometheus`)")
    work = tmp_path_factory.mktemp("prometheus-capacity-outage")
    data = work / "data"
    data.mkdir()
    history = work / "history.om"
    history.write_text(_openmetrics(), encoding="utf-8")
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(history), str(data)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    server = PrometheusServer(data, work)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _settings(url: str) -> Settings:
    document: dict[str, Any] = {
        "demand_classes": [{"name": CLASS}],
        "pools": [
            {"id": ONPREM, "kind": "on-prem", "chips_per_unit": 8, "min_units": NODES, "max_units": NODES,
             "price_per_chip_hour_usd": 0.0, "lead_time": "0s", "serves": [CLASS]},
            {"id": SPOT, "kind": "gpu-node-pool", "tier": "spot", "chips_per_unit": 8, "max_units": 48,
             "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": [CLASS]},
        ],
        "budgets": [{"name": "burst", "pools": [SPOT], "monthly_cap_usd": CAP_USD, "pacing": "forecast"}],
        "forecast": {"model": "persistence", "history": "26h", "step": "5m", "max_staleness": "10m"},
        "prometheus": {
            "url": url, "retries": 0, "timeout": "5s", "classes": {CLASS: {"query": "max(demand_gpus)"}},
            "pools": {ONPREM: {"capacity_query": QUERY}},
        },
        "ledger": {"backend": "memory"},
    }  # fmt: skip
    return settings_from_mapping(document, source="capacity history outage test")


def test_a_pool_not_read_at_the_refresh_keeps_its_last_history_and_is_read_again_once_it_answers(
    outage_prometheus: PrometheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _settings(outage_prometheus.url)
    prometheus = settings.prometheus
    assert prometheus is not None
    pools = settings.pool_specs()
    classes = settings.demand_class_models()
    demand = PrometheusSource.from_settings(prometheus, {CLASS: "max(demand_gpus)"})
    capacity = PrometheusOnPremCapacity.from_settings(prometheus, pools)
    (group,) = demand_groups([CLASS], pools)
    profiles = HourlyBurstProfile([group], pools, settings.forecast.history, settings.forecast.step, timedelta(seconds=60))

    def read(start: datetime, end: datetime) -> Any:
        return demand.fetch_each(classes, start, end, settings.forecast.step)

    noon = profiles.at(NOON, read, capacity, [ONPREM])
    assert noon is not None
    assert noon.hourly_chips[group.name] == pytest.approx((BURST_ABOVE_READ,) * 24)

    with caplog.at_level(logging.INFO, logger="agent.burst_history"):
        one = profiles.at(ONE, read, capacity, [])  # this tick's own read of the pool failed too
    assert one is not None
    hourly = one.hourly_chips[group.name]
    # Every hour but 12 is measured above the 30 nodes read at noon; it was 40 an hour, above the 40 nodes.
    assert [hourly[h] for h in range(24) if h != 12] == pytest.approx([BURST_ABOVE_READ] * 23)
    # Today's 12:00-12:55, after the noon read, are measured above max_units; yesterday's 12:00-12:55 above 30.
    assert BURST_ABOVE_MAX < hourly[12] < BURST_ABOVE_READ
    assert (
        f"burst profile: on-prem capacity of {ONPREM} not read over the history (the newest value is stale"
        in caplog.text
    )
    assert f"{ONPREM} measured above its capacity history read at {NOON.isoformat()}" in caplog.text

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="agent.burst_history"):
        again = profiles.at(ONE + timedelta(minutes=7), read, capacity, [ONPREM])
    assert again is not None
    assert f"burst profile: on-prem capacity of {ONPREM} read over the history again" in caplog.text
    # Read at 13:07, the history has 30 nodes up to 12:40: only 12:45-12:55 of today are above max_units.
    assert hourly[12] < again.hourly_chips[group.name][12] < BURST_ABOVE_READ


def test_the_tick_after_an_unread_refresh_paces_on_the_capacity_read_before(
    outage_prometheus: PrometheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The daemon's wiring: the loop refreshes the profile at 13:00, when the capacity history cannot be read, and
    paces on the history read at noon; before, the burst measured above max_units (40 an hour) was covered by the
    money and nothing was paced."""
    settings = _settings(outage_prometheus.url)
    prometheus = settings.prometheus
    assert prometheus is not None
    pools = settings.pool_specs()
    parts = AgentParts(
        PrometheusSource.from_settings(prometheus, {CLASS: "max(demand_gpus)"}),
        build_forecaster(settings.forecast),
        SimulatedCluster(pools, SimulatedClock(NOON), initial_units={ONPREM: NODES, SPOT: 0}),
        InMemoryLedger(),
        RecordingNotifier(),
        onprem=PrometheusOnPremCapacity.from_settings(prometheus, pools),
    )
    agent = Agent(settings, parts)
    agent.run_once(NOON)

    with caplog.at_level(logging.INFO, logger="agent.burst_history"):
        report = agent.run_once(ONE)

    (share,) = report.plan.decisions[SPOT].demand
    assert share.unpaced_need is not None and share.need < share.unpaced_need
    assert f"{ONPREM} measured above its capacity history read at {NOON.isoformat()}" in caplog.text
