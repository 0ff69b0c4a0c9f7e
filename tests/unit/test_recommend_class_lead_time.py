"""recommend's lead time of a demand class is the one its capacity can be added in: the longest of the pools that
serve it and can be scaled, as the planner takes its peak over (and the simulation report's bands). An on-prem pool
is never resized, so its configured lead_time is no wait for capacity: counted, a class bursting from an on-prem
pool with a lead_time of an hour to a cloud pool of ten minutes read a lead time of an hour beside a forecast peak
taken over the ten minutes and a tick."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from actuators import SimulatedCluster
from agent.commands.recommend_document import recommendation_document
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models.clock import SimulatedClock
from tests.conftest import TraceWriter

START = datetime(2024, 3, 1, tzinfo=UTC)
AT = START + timedelta(days=2)
CLOUD_LEAD = timedelta(minutes=10)


def _pool(pool_id: str, kind: str, lead_time: str, serves: list[str]) -> dict[str, Any]:
    units = {"min_units": 2, "max_units": 2} if kind == "on-prem" else {"max_units": 8}
    return {"id": pool_id, "kind": kind, "chips_per_unit": 8, "price_per_chip_hour_usd": 1.0,
            "lead_time": lead_time, "serves": serves, **units}  # fmt: skip


def _agent(write_trace: TraceWriter) -> Agent:
    config: dict[str, Any] = {
        "demand_classes": [{"name": "burst"}, {"name": "local"}],
        "pools": [
            _pool("onprem", "on-prem", "1h", ["burst"]),
            _pool("cloud", "gpu-node-pool", "10m", ["burst"]),
            _pool("onprem-local", "on-prem", "1h", ["local"]),
        ],
        "forecast": {"model": "last-value", "history": "1d", "step": "5m"},
        "loop": {"tick_interval": "5m"},
        "ledger": {"backend": "memory"},
    }
    steps = 2 * 288
    source = TraceSource(read_trace(write_trace({"burst": [24.0] * steps, "local": [8.0] * steps}, start=str(START))))
    settings = settings_from_mapping(config, source="test config")
    cluster = SimulatedCluster(settings.pool_specs(), SimulatedClock(AT), {"cloud": 1})
    parts = AgentParts(source, build_forecaster(settings.forecast), cluster, InMemoryLedger(), RecordingNotifier())
    return Agent(settings, parts, holder="test")


def test_a_class_s_lead_time_is_its_scalable_pools_not_its_on_prem_pool_s(write_trace: TraceWriter) -> None:
    agent = _agent(write_trace)
    agent.fit_on(agent.parts.source.fetch(agent.classes, AT - timedelta(days=1), AT, agent.step), AT)
    tick = agent.run_once(AT)
    states = {s.pool_id: s for s in agent.parts.actuator.list_pools()}
    document = recommendation_document("c.yaml", AT, agent, tick, states, "test", "http://prometheus")
    classes = {c["name"]: c for c in document["classes"]}

    burst = classes["burst"]
    assert burst["lead_time_s"] == CLOUD_LEAD.total_seconds()
    assert burst["forecast"]["peak_steps"] == math.ceil((CLOUD_LEAD + agent.tick) / agent.step)
    assert classes["local"]["lead_time_s"] is None  # on-prem only: no capacity to wait for
