"""The on-prem capacity history a paced budget's burst profile is measured above is read once per clock hour, as a
history: when kube-state-metrics is down for the last minutes before that read, the steps before keep the units
read then and only the steps without a value are measured above the pool's ``max_units``. Judged by its newest
value, that one stale end threw the whole history away: the burst of the whole history was measured above the 40
nodes (a third of it, with 30 of 40 nodes up), or above the last history read, for the hour, and pacing funded
burst the money could not pay for. A pool whose read fails (Prometheus unreachable) keeps the last history read of
it, and is read again at the next tick whose own capacity read of the pool succeeds; the log says which capacity is
used.

On a real Prometheus, loaded with ``promtool tsdb create-blocks-from openmetrics``: ``demand_gpus`` is 360 and
``ready_nodes{pool="onprem"}`` 30 (of 40 8-GPU nodes) at every minute from 27 hours before 12:00 to 14:00, except
that ``ready_nodes`` has no sample from 12:41 to 13:00 (kube-state-metrics down; back at 13:01)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from actuators.simulated import SimulatedCluster
from agent.burst_history import HALF_LIFE, HourlyBurstProfile
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
from tests.prometheus.server import PrometheusServer, serving_openmetrics

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
    with serving_openmetrics(_openmetrics(), tmp_path_factory.mktemp("prometheus-capacity-outage")) as server:
        yield server


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


def _closed_port_url() -> str:
    """A Prometheus URL on 127.0.0.1 that nothing listens on: a read there fails at once (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _hour_12_at_one(missing: list[datetime]) -> float:
    """The recency-weighted mean burst of 12:00-12:55 over the history read at 13:00 (yesterday's and today's
    steps, ages counted from 12:55): 120 above the 30 nodes read at a step, 40 above the 40 nodes where ``missing``."""
    newest = ONE - timedelta(minutes=5)
    steps = [day + timedelta(minutes=5 * i) for day in (NOON - timedelta(days=1), NOON) for i in range(12)]
    weights = [0.5 ** ((newest - t) / HALF_LIFE) for t in steps]
    bursts = [BURST_ABOVE_MAX if t in missing else BURST_ABOVE_READ for t in steps]
    return float(np.dot(weights, bursts) / sum(weights))


def test_a_capacity_history_that_ends_stale_is_read_as_a_history(
    outage_prometheus: PrometheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Read at 13:00, kube-state-metrics down since 12:41: the 26 hours before keep their 30 nodes, and only the
    steps without a sample are measured above the 40 nodes, never read as 0 nodes."""
    settings = _settings(outage_prometheus.url)
    prometheus = settings.prometheus
    assert prometheus is not None
    pools = settings.pool_specs()
    classes = settings.demand_class_models()
    capacity = PrometheusOnPremCapacity.from_settings(prometheus, pools)
    step = settings.forecast.step

    units, problems = capacity.units_between(pools, ONE - settings.forecast.history, ONE, step)

    assert problems == {}
    series = units[ONPREM]
    missing = [t.to_pydatetime() for t in series.index[series.isna()]]
    # 12:45, 12:50 and 12:55: the newest sample of ready_nodes, 12:40, is not within their lookback (5 minutes)
    assert missing == [ONE - timedelta(minutes=m) for m in (15, 10, 5)]
    assert (series.dropna() == UP).all() and len(series.dropna()) == len(series) - 3

    demand = PrometheusSource.from_settings(prometheus, {CLASS: "max(demand_gpus)"})
    (group,) = demand_groups([CLASS], pools)
    profiles = HourlyBurstProfile([group], pools, settings.forecast.history, step, timedelta(seconds=60))
    with caplog.at_level(logging.INFO, logger="agent.burst_history"):
        one = profiles.at(ONE, lambda start, end: demand.fetch_each(classes, start, end, step), capacity, [])
    assert one is not None
    hourly = one.hourly_chips[group.name]
    # Every hour but 12 is measured above the 30 nodes read then; it was 40 an hour, above the 40 nodes.
    assert [hourly[h] for h in range(24) if h != 12] == pytest.approx([BURST_ABOVE_READ] * 23)
    assert hourly[12] == pytest.approx(_hour_12_at_one(missing))
    assert "not read over the history" not in caplog.text


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
    # At 13:00 the capacity is read from a Prometheus that cannot be reached (the demand from the one that answers).
    unreachable = PrometheusOnPremCapacity.from_settings(
        prometheus.model_copy(update={"url": _closed_port_url()}), pools
    )
    (group,) = demand_groups([CLASS], pools)
    profiles = HourlyBurstProfile(
        [group], pools, settings.forecast.history, settings.forecast.step, timedelta(seconds=60)
    )

    def read(start: datetime, end: datetime) -> Any:
        return demand.fetch_each(classes, start, end, settings.forecast.step)

    noon = profiles.at(NOON, read, capacity, [ONPREM])
    assert noon is not None
    assert noon.hourly_chips[group.name] == pytest.approx((BURST_ABOVE_READ,) * 24)

    with caplog.at_level(logging.INFO, logger="agent.burst_history"):
        one = profiles.at(ONE, read, unreachable, [])  # this tick's own read of the pool failed too
    assert one is not None
    hourly = one.hourly_chips[group.name]
    # Every hour but 12 is measured above the 30 nodes read at noon; it was 40 an hour, above the 40 nodes.
    assert [hourly[h] for h in range(24) if h != 12] == pytest.approx([BURST_ABOVE_READ] * 23)
    # Today's 12:00-12:55, after the noon read, are measured above max_units; yesterday's 12:00-12:55 above 30.
    noon_steps = [NOON + timedelta(minutes=5 * i) for i in range(12)]
    assert hourly[12] == pytest.approx(_hour_12_at_one(noon_steps))
    assert f"burst profile: on-prem capacity of {ONPREM} not read over the history (" in caplog.text
    assert f"{ONPREM} measured above its capacity history read at {NOON.isoformat()}" in caplog.text

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="agent.burst_history"):
        again = profiles.at(ONE + timedelta(minutes=7), read, capacity, [ONPREM])
    assert again is not None
    assert f"burst profile: on-prem capacity of {ONPREM} read over the history again" in caplog.text
    # Read at 13:07, the history has 30 nodes up to 12:40: only 12:45-12:55 of today are above max_units.
    assert hourly[12] < again.hourly_chips[group.name][12] < BURST_ABOVE_READ


def test_a_daemon_starting_while_the_capacity_history_ends_stale_paces_on_it(
    outage_prometheus: PrometheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The daemon's wiring, its first tick at 13:00 with kube-state-metrics down since 12:41 and no history read
    before: the burst history is measured above the 30 nodes read over it, 120 an hour, which the money pays half
    of, so today's burst is paced. Judged by its newest value, the history was measured above the 40 nodes, 40 an
    hour, which the money covered: nothing was paced."""
    settings = _settings(outage_prometheus.url)
    prometheus = settings.prometheus
    assert prometheus is not None
    pools = settings.pool_specs()
    parts = AgentParts(
        PrometheusSource.from_settings(prometheus, {CLASS: "max(demand_gpus)"}),
        build_forecaster(settings.forecast),
        SimulatedCluster(pools, SimulatedClock(ONE), initial_units={ONPREM: NODES, SPOT: 0}),
        InMemoryLedger(),
        RecordingNotifier(),
        onprem=PrometheusOnPremCapacity.from_settings(prometheus, pools),
    )

    with caplog.at_level(logging.INFO, logger="agent.burst_history"):
        report = Agent(settings, parts).run_once(ONE)

    (share,) = report.plan.decisions[SPOT].demand
    assert share.unpaced_need is not None and share.need < share.unpaced_need
    assert "not read over the history" not in caplog.text
