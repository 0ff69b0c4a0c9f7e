"""A paced budget's burst history counts the burst above the on-prem capacity read at each step of the history, as a
tick counts its burst need above the capacity read now, not above ``max_units``. Measured above ``max_units``, a day
with 10 of 40 on-prem nodes down counted a third of the burst the cloud served: pacing took the period's remaining
need for a third of what it is and funded all of today's burst, so the money ran out halfway through the period.

On a real Prometheus, loaded with ``promtool tsdb create-blocks-from openmetrics``: ``demand_gpus`` is 360 and
``ready_nodes{pool="onprem"}`` 30 (of 40 8-GPU nodes) for the 26 hours before the tick; the capacity query is
``max(ready_nodes{pool="onprem"})``. The agent runs as the daemon wires it: demand and capacity from Prometheus."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actuators.simulated import SimulatedCluster
from agent.ledger.memory import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.sources.onprem_capacity import PrometheusOnPremCapacity
from agent.sources.prometheus import PrometheusSource
from config import settings_from_mapping
from config.schema import Settings
from forecasting.factory import build_forecaster
from models.clock import SimulatedClock
from tests.prometheus.server import PrometheusServer, serving_openmetrics

pytestmark = pytest.mark.xdist_group("prometheus")

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)  # 396 hours before the period ends (February 1st)
HOURS_LEFT = 396
ONPREM, SPOT, CLASS = "onprem", "spot", "train"
NODES, UP, DEMAND = 40, 30, 360.0
# The burst the cloud served: 360 GPUs above 30 nodes of 8 is 120 an hour. Half of what it needs until the period
# ends, at the spot price of 1 USD a GPU-hour.
CAP_USD = 120.0 * HOURS_LEFT / 2


def _openmetrics() -> str:
    lines = ["# TYPE demand_gpus gauge\n"]
    minutes = range(-26 * 60, 1)
    stamps = [int((NOW + timedelta(minutes=m)).timestamp()) for m in minutes]
    lines += [f"demand_gpus {DEMAND:g} {t}\n" for t in stamps]
    lines.append("# TYPE ready_nodes gauge\n")
    lines += [f'ready_nodes{{pool="{ONPREM}"}} {UP} {t}\n' for t in stamps]
    lines.append("# EOF\n")
    return "".join(lines)


@pytest.fixture(scope="module")
def history_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    with serving_openmetrics(_openmetrics(), tmp_path_factory.mktemp("prometheus-burst-history")) as server:
        yield server


def _settings(url: str, capacity_query: str) -> Settings:
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
            "pools": {ONPREM: {"capacity_query": capacity_query}},
        },
        "ledger": {"backend": "memory"},
    }  # fmt: skip
    return settings_from_mapping(document, source="burst history test")


def _paced(url: str, capacity_query: str) -> tuple[float, float | None]:
    """The class's need at the tick at ``NOW``, paced, and before pacing (None when pacing cut nothing)."""
    settings = _settings(url, capacity_query)
    prometheus = settings.prometheus
    assert prometheus is not None
    clock = SimulatedClock(NOW)
    pools = settings.pool_specs()
    parts = AgentParts(
        PrometheusSource.from_settings(prometheus, {CLASS: "max(demand_gpus)"}),
        build_forecaster(settings.forecast),
        SimulatedCluster(pools, clock, initial_units={ONPREM: NODES, SPOT: 0}),
        InMemoryLedger(),
        RecordingNotifier(),
        onprem=PrometheusOnPremCapacity.from_settings(prometheus, pools),
    )
    report = Agent(settings, parts).run_once(NOW)
    (share,) = report.plan.decisions[SPOT].demand
    return share.need, share.unpaced_need


def test_the_burst_history_counts_demand_above_the_capacity_read_then(history_prometheus: PrometheusServer) -> None:
    # 360 GPUs, 240 of them on the 30 nodes up: the money left pays for half of the 120 an hour the period still
    # needs, so half of today's burst of 120 is funded
    assert _paced(history_prometheus.url, f'max(ready_nodes{{pool="{ONPREM}"}})') == (300.0, 360.0)


def test_a_capacity_history_not_read_counts_the_burst_above_max_units(
    history_prometheus: PrometheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    # The query answers now (30 nodes) but had no value over the history before: the history's burst is counted
    # above the 40 nodes, 40 an hour, which the money covers whole, so today's 120 are funded in full.
    query = f'max(ready_nodes{{pool="{ONPREM}"}}) and on() (time() >= {int(NOW.timestamp()) - 60})'
    assert _paced(history_prometheus.url, query) == (360.0, None)
    assert "burst profile: on-prem capacity of onprem not read over the history" in caplog.text
