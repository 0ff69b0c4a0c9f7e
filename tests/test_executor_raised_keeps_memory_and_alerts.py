"""A tick whose executor raises part-way keeps what it did before: the planner memory it left and its alerts.

West runs two pools, ``a`` and ``b``, each serving its own demand and both scaled up at the first tick (the plan's
resizes go by pool). ``a``'s resize is refused with a permanent error (bad credentials): the executor blocks the
pool and raises its critical alert. ``b``'s then raises an error no adapter translates, failing the tick. The
executor's memory and alerts were its own until it returned, so the failure lost both: ``a`` was not blocked (the
next tick sent it a resize again) and the alert saying how to unblock it was never told, though ``Agent.act`` says
the executor's alerts are delivered when a tick fails. Both now stay: the pool is blocked and the alert told.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from actuators import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from forecasting.factory import build_forecaster
from models import ActionResult, AlertKind, PermanentActuatorError, PoolState, Severity
from models.clock import SimulatedClock
from tests.conftest import TraceWriter

START = datetime(2024, 1, 15, 12, tzinfo=UTC)
TICK = timedelta(minutes=5)


class RefusedThenRaises:
    """The cluster's actuator: ``a``'s resizes are refused for good, ``b``'s first raises untranslated."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self._cluster = cluster
        self.sent: list[str] = []

    def list_pools(self) -> Sequence[PoolState]:
        return self._cluster.list_pools()

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        self.sent.append(pool_id)
        if pool_id == "a":
            raise PermanentActuatorError(pool_id, "HTTP 403: the role may not update this node pool")
        if self.sent.count("b") == 1:
            raise RuntimeError(f"resize of {pool_id} to {to_units}: the response could not be read")
        return self._cluster.resize(pool_id, to_units, key)


def _pool(pool_id: str, serves: str) -> dict[str, Any]:
    return {"id": pool_id, "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8, "min_units": 0,
            "max_units": 16, "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": [serves]}  # fmt: skip


def test_a_tick_whose_executor_raised_keeps_the_pool_it_blocked_and_tells_its_alert(write_trace: TraceWriter) -> None:
    config = {
        "demand_classes": [{"name": "x"}, {"name": "y"}],
        "pools": [_pool("a", "x"), _pool("b", "y")],
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
    }
    trace = write_trace({"x": [16.0] * 40, "y": [16.0] * 40}, start=(START - timedelta(hours=2)).isoformat())
    settings = settings_from_mapping(config, source="test config")
    clock = SimulatedClock(START)
    cluster = SimulatedCluster(settings.pool_specs(), clock, {"a": 0, "b": 0})
    actuator = RefusedThenRaises(cluster)
    notifier = RecordingNotifier()
    parts = AgentParts(
        TraceSource(read_trace(trace)), build_forecaster(settings.forecast), actuator, InMemoryLedger(), notifier
    )
    agent = Agent(settings, parts, holder="west")
    failed = []
    for i in range(2):
        now = START + i * TICK
        clock.set(now)
        try:
            agent.run_once(now)
        except RuntimeError:
            failed.append(now)

    assert failed == [START], failed
    assert actuator.sent == ["a", "b", "b"], actuator.sent  # a blocked at the first tick: nothing sent to it since
    assert "a" in agent.memory.blocked, agent.memory
    told = [e for e in notifier.events if e.subject == "a" and e.kind is AlertKind.ACTUATOR_FAILURE]
    assert [(e.at, e.severity) for e in told] == [(START, Severity.CRITICAL)], notifier.events  # none before
    assert "403" in told[0].details["error"], told
