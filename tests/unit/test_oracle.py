"""The oracle's schedule: always enough ready units, and no cheaper schedule exists (checked by brute force)."""

from __future__ import annotations

import itertools
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.simulation.oracle import oracle_schedule

STEP = timedelta(minutes=5)


def ready_from(held: np.ndarray, lead_steps: int, initial: int) -> np.ndarray:
    """Replay a held (paid) schedule: increases arrive lead_steps later, decreases leave at once."""
    ready, pending = initial, [0] * (len(held) + lead_steps + 1)
    out, paid = [], initial
    for t, target in enumerate(held):
        ready += pending[t]
        if target > paid:
            pending[t + lead_steps] += target - paid
            if lead_steps == 0:
                ready += target - paid
                pending[t] = 0
        elif target < paid:
            ready -= paid - target
        paid = int(target)
        out.append(ready)
    return np.array(out)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=30), st.integers(0, 4), st.integers(0, 4))
def test_schedule_always_has_the_required_units_ready(required: list[int], lead_steps: int, initial: int) -> None:
    need = np.array(required)
    initial = max(initial, int(need[: lead_steps + 1].max()))
    held = oracle_schedule(need, STEP * lead_steps, STEP, initial)
    assert (ready_from(held, lead_steps, initial) >= need).all()


@pytest.mark.parametrize("lead_steps", [0, 1, 2])
def test_schedule_is_the_cheapest_feasible_one(lead_steps: int) -> None:
    rng = np.random.default_rng(7)
    for _ in range(25):
        need = rng.integers(0, 3, size=7)
        initial = int(need[: lead_steps + 1].max())
        best = min(
            sum(candidate)
            for candidate in itertools.product(range(3), repeat=len(need))
            if (ready_from(np.array(candidate), lead_steps, initial) >= need).all()
        )
        assert oracle_schedule(need, STEP * lead_steps, STEP, initial).sum() == best


def test_short_gaps_are_bridged_and_long_ones_released() -> None:
    need = np.array([1, 0, 0, 1, 0, 0, 0, 0, 1])
    held = oracle_schedule(need, STEP * 2, STEP, initial=1)
    assert held.tolist() == [1, 1, 1, 1, 0, 0, 1, 1, 1]
