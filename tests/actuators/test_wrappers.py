"""RoutingActuator and InstrumentedActuator, wrapped around simulated clusters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from actuators.instrumented import InstrumentedActuator
from actuators.routing import RoutingActuator
from actuators.simulated import SimulatedCluster
from models import (
    AcceleratorFamily,
    ActionStatus,
    CapacityTier,
    CapacityUnavailable,
    PermanentActuatorError,
    PoolKind,
    PoolSpec,
)
from models.clock import SimulatedClock

NOW = datetime(2024, 5, 1, tzinfo=UTC)


def _sim(clock: SimulatedClock, *pool_ids: str) -> SimulatedCluster:
    specs = [
        PoolSpec(
            p, PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 9, 10.0, timedelta(0), ("c",)
        )
        for p in pool_ids
    ]
    return SimulatedCluster(specs, clock, initial_units=dict.fromkeys(pool_ids, 1))


def test_routing_sends_each_pool_to_its_actuator_and_lists_each_once() -> None:
    clock = SimulatedClock(NOW)
    left, right = _sim(clock, "a", "b"), _sim(clock, "c")
    router = RoutingActuator({"a": left, "b": left, "c": right})
    assert [s.pool_id for s in router.list_pools()] == ["a", "b", "c"]
    router.resize("c", 4, "k")
    assert right.paid_units() == {"c": 4}
    assert left.paid_units() == {"a": 1, "b": 1}
    with pytest.raises(PermanentActuatorError, match="no actuator owns"):
        router.resize("z", 1, "k2")


def test_instrumentation_counts_outcomes_and_exports_pool_sizes() -> None:
    clock = SimulatedClock(NOW)
    sim = _sim(clock, "a")
    registry = CollectorRegistry()
    actuator = InstrumentedActuator(sim, registry)
    assert actuator.resize("a", 3, "k").status is ActionStatus.DONE
    sim.add_stockout("a", NOW, NOW + timedelta(hours=1))
    with pytest.raises(CapacityUnavailable):
        actuator.resize("a", 5, "k2")
    actuator.list_pools()

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert sample("leadtime_actuator_calls_total", method="resize", pool="a", outcome="done") == 1.0
    assert sample("leadtime_actuator_calls_total", method="resize", pool="a", outcome="CapacityUnavailable") == 1.0
    assert sample("leadtime_pool_target_units", pool="a") == 3.0
    assert sample("leadtime_actuator_call_duration_seconds_count", method="resize") == 2.0
