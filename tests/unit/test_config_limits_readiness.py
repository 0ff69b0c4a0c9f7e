"""``daemon.endpoints.ready_max_tick_age`` no longer than a tick is refused at load: just before a tick ends the last
successful tick is a whole interval old, so a bound of 0 failed /readyz at every probe, and a bound of one tick
whenever a tick ended later in its slot than the one before, on a replica that never missed a tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.daemon.health import HealthState
from config import settings_from_mapping
from models import ConfigError

BASE: dict[str, Any] = {
    "demand_classes": [{"name": "train"}],
    "pools": [
        {
            "id": "a100",
            "kind": "gpu-node-pool",
            "chips_per_unit": 8,
            "max_units": 4,
            "price_per_chip_hour_usd": 3.67,
            "lead_time": "10m",
            "serves": ["train"],
        }
    ],
}


@pytest.mark.parametrize(
    ("extra", "shown"),
    [
        ({"daemon": {"endpoints": {"ready_max_tick_age": 0}}}, "(loop.tick_interval, 1m), got 0s"),
        ({"daemon": {"endpoints": {"ready_max_tick_age": "30s"}}}, "(loop.tick_interval, 1m), got 30s"),
        ({"daemon": {"endpoints": {"ready_max_tick_age": "1m"}}}, "(loop.tick_interval, 1m), got 1m"),
        (
            {"daemon": {"endpoints": {"ready_max_tick_age": "5m"}}, "loop": {"tick_interval": "5m"}},
            "(loop.tick_interval, 5m), got 5m",
        ),
    ],
)
def test_a_readiness_bound_no_longer_than_a_tick_is_refused_naming_the_key(extra: dict[str, Any], shown: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, **extra})
    (problem,) = caught.value.problems
    assert problem.key_path == "daemon.endpoints.ready_max_tick_age"
    assert f"must be longer than one tick {shown}" in problem.message


def _not_ready_probes(bound: timedelta, tick: timedelta) -> tuple[int, int]:
    """Probes every 15 s for an hour of ticks that all succeed, each ending 5 s into its slot but every fourth 20 s
    in: how many find the replica not ready, of how many."""
    health = HealthState(bound)
    start = datetime(2026, 1, 5, tzinfo=UTC)
    ends = [start + n * tick + timedelta(seconds=20 if n % 4 == 3 else 5) for n in range(60)]
    not_ready = probes = 0
    for second in range(int(tick.total_seconds()), int(60 * tick.total_seconds()), 15):
        now = start + timedelta(seconds=second)
        done = [end for end in ends if end <= now]
        if done:
            health.tick_succeeded(done[-1])
        not_ready += not health.readiness(now).ready
        probes += 1
    return not_ready, probes


def test_a_bound_of_one_tick_fails_the_probe_of_a_replica_that_misses_no_tick() -> None:
    tick = timedelta(minutes=1)
    not_ready, probes = _not_ready_probes(timedelta(0), tick)
    assert not_ready == probes
    assert 0 < _not_ready_probes(tick, tick)[0] < probes
    settings = settings_from_mapping({**BASE, "daemon": {"endpoints": {"ready_max_tick_age": "2m"}}})
    bound = settings.daemon.ready_bound(settings.loop.tick_interval)
    assert bound == timedelta(minutes=2)
    assert _not_ready_probes(bound, tick)[0] == 0
    assert _not_ready_probes(settings_from_mapping(BASE).daemon.ready_bound(tick), tick)[0] == 0  # unset: three ticks
