"""The oracle's schedule: always enough ready units, and no cheaper schedule exists (checked by brute force)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actuators import SimulatedCluster
from agent.simulation.oracle import oracle_schedule
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock

STEP = timedelta(minutes=5)
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def ready_from(held: np.ndarray, lead_steps: int) -> np.ndarray:
    """Replay a paid schedule on the simulated cluster itself and return the ready units at each step."""
    pool = PoolSpec(
        "p",
        PoolKind.GPU_NODE_POOL,
        CapacityTier.ON_DEMAND,
        AcceleratorFamily.GPU,
        1,
        0,
        99,
        1.0,
        STEP * lead_steps,
        ("a",),
    )
    clock = SimulatedClock(T0)
    cluster = SimulatedCluster([pool], clock, {"p": int(held[0])})
    ready = []
    for t, target in enumerate(held):
        clock.set(T0 + t * STEP)
        cluster.advance(clock.now())
        cluster.resize("p", int(target), f"k{t}")
        cluster.advance(clock.now())
        ready.append(cluster.ready_units()["p"])
    return np.array(ready)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=30), st.integers(0, 4))
def test_schedule_always_has_the_required_units_ready(required: list[int], lead_steps: int) -> None:
    need = np.array(required)
    held = oracle_schedule(need, STEP * lead_steps, STEP)
    assert held[0] == need[: lead_steps + 1].max()
    assert (ready_from(held, lead_steps) >= need).all()


@pytest.mark.parametrize("lead_steps", [0, 1, 2])
def test_no_cheaper_schedule_exists(lead_steps: int) -> None:
    rng = np.random.default_rng(7)
    for _ in range(12):
        need = rng.integers(0, 3, size=6)
        start = int(need[: lead_steps + 1].max())
        best = min(
            sum(candidate)
            for candidate in itertools.product(range(3), repeat=len(need))
            if candidate[0] == start and (ready_from(np.array(candidate), lead_steps) >= need).all()
        )
        assert oracle_schedule(need, STEP * lead_steps, STEP).sum() == best


def test_short_gaps_are_bridged_and_long_ones_released() -> None:
    need = np.array([1, 0, 0, 1, 0, 0, 0, 0, 1])
    assert oracle_schedule(need, STEP * 2, STEP).tolist() == [1, 1, 1, 1, 0, 0, 1, 1, 1]
