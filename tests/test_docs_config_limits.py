"""Limits of the configuration that the reference states and loading enforces.

``daemon.endpoints.live_max_tick_duration`` no longer than a tick is refused at load, naming the key and the tick:
/healthz fails while a tick has run longer than the bound, and a tick is given half its interval for its demand
reads alone, then plans and writes to the cloud. With a bound of 1s, a replica whose ticks each took 50s of their
minute (30s of slow demand reads, 20s of cloud writes) failed the shipped liveness probe three times running at
every tick, and so was restarted by the kubelet every minute, for 8 of the 20 offsets the probe can have in its
period; it is not stuck.

And the minimums loading enforces on ``budgets[].commit_horizon`` (two ticks), ``ledger.reservation_ttl`` (1m) and
``ledger.connect_timeout`` (1s) are the ones the reference states."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from agent.daemon.health import HealthState
from config import settings_from_mapping
from config.reference import reference_markdown
from models import ConfigError
from tests.daemon.manifests import DEPLOY

POOL = {"id": "a100", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.67,
        "lead_time": "10m", "serves": ["train"]}  # fmt: skip
BASE: dict[str, Any] = {"demand_classes": [{"name": "train"}], "pools": [POOL]}


def _problems(extra: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, **extra})
    return [(p.key_path, p.message) for p in caught.value.problems]


def _row(key: str) -> str:
    [row] = [line for line in reference_markdown().splitlines() if line.startswith(f"| `{key}` |")]
    return row


@pytest.mark.parametrize(
    ("extra", "shown"),
    [
        ({"daemon": {"endpoints": {"live_max_tick_duration": "1s"}}}, "(loop.tick_interval, 1m), got 1s"),
        ({"daemon": {"endpoints": {"live_max_tick_duration": "30s"}}}, "(loop.tick_interval, 1m), got 30s"),
        ({"daemon": {"endpoints": {"live_max_tick_duration": "1m"}}}, "(loop.tick_interval, 1m), got 1m"),
        (
            {"daemon": {"endpoints": {"live_max_tick_duration": "5m"}}, "loop": {"tick_interval": "5m"}},
            "(loop.tick_interval, 5m), got 5m",
        ),
    ],
)
def test_a_liveness_bound_no_longer_than_a_tick_is_refused_naming_the_key(extra: dict[str, Any], shown: str) -> None:
    [(key, message)] = _problems(extra)
    assert key == "daemon.endpoints.live_max_tick_duration"
    assert f"must be longer than one tick {shown}" in message
    assert "longer than `loop.tick_interval`" in _row("live_max_tick_duration")


def test_a_liveness_bound_longer_than_a_tick_or_unset_loads() -> None:
    loaded = settings_from_mapping({**BASE, "daemon": {"endpoints": {"live_max_tick_duration": "61s"}}})
    assert loaded.daemon.live_bound(loaded.loop.tick_interval) == timedelta(seconds=61)
    unset = settings_from_mapping(BASE)
    assert unset.daemon.live_bound(unset.loop.tick_interval) == timedelta(minutes=10)


def _restarts(bound: timedelta, tick: timedelta, tick_takes: timedelta, phase: int) -> int:
    """How often the shipped liveness probe (deploy/base/deployment.yaml), first sent ``phase`` seconds into the
    hour, would have the kubelet restart a replica over an hour of ticks that each run ``tick_takes`` from the start
    of their slot and then end."""
    [container] = yaml.safe_load((DEPLOY / "base" / "deployment.yaml").read_text())["spec"]["template"]["spec"][
        "containers"
    ]
    probe = container["livenessProbe"]
    period, threshold = probe["periodSeconds"], probe["failureThreshold"]
    health = HealthState(timedelta(minutes=3), bound)
    start = datetime(2026, 1, 5, tzinfo=UTC)
    restarts = failed_in_a_row = 0
    for second in range(phase, 3600, period):
        now = start + timedelta(seconds=second)
        slot = start + tick * ((now - start) // tick)
        if now - slot < tick_takes:
            health.tick_started(slot)
        else:
            health.tick_ended()
        failed_in_a_row = 0 if health.liveness(now).ready else failed_in_a_row + 1
        if failed_in_a_row == threshold:
            restarts, failed_in_a_row = restarts + 1, 0
    return restarts


def test_what_the_limit_rests_on_a_slow_tick_restarts_a_replica_under_a_bound_below_a_tick() -> None:
    tick, slow = timedelta(minutes=1), timedelta(seconds=50)  # 30s of demand reads (half a tick), 20s of writes
    phases = range(20)  # the probe's period: every offset of its first probe
    below = [_restarts(timedelta(seconds=1), tick, slow, phase) for phase in phases]
    assert sum(1 for n in below if n) == 8 and max(below) == 60, below  # restarted at every tick for 8 offsets of 20
    assert [_restarts(timedelta(seconds=61), tick, slow, phase) for phase in phases] == [0] * 20


@pytest.mark.parametrize(
    ("key", "row", "extra", "at_least", "below"),
    [
        ("budgets[0].commit_horizon", "commit_horizon", {"loop": {"tick_interval": "5m"}}, "10m", "9m"),
        ("ledger", "reservation_ttl", {}, "1m", "59s"),
        ("ledger", "connect_timeout", {}, "1s", "500ms"),
    ],
)
def test_the_reference_states_the_minimum_that_loading_enforces(
    key: str, row: str, extra: dict[str, Any], at_least: str, below: str
) -> None:
    def config(value: str) -> dict[str, Any]:
        if row == "commit_horizon":
            budget = {"name": "b", "pools": ["a100"], "monthly_cap_usd": 1000, "commit_horizon": value}
            return {**extra, "budgets": [budget]}
        return {**extra, "ledger": {row: value}}

    assert settings_from_mapping({**BASE, **config(at_least)}) is not None
    [(refused_key, _)] = _problems(config(below))
    assert refused_key.startswith(key)
    text = _row(row)
    if row == "commit_horizon":
        assert "at least two ticks of `loop.tick_interval`" in text
    else:
        assert f"(duration, at least {at_least}" in text
