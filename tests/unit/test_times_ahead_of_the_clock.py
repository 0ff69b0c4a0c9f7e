"""Times written while the wall clock was ahead (a VM resumed with a clock 6 h fast, then stepped back by NTP) do not
hold anything for the step's length once the clock is corrected: the planner memory's back-offs, changes and
failures, the condition tracker's record of ends told, and the alerts' de-duplication."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from agent.conditions import ConditionTracker
from agent.memory_clock import memory_within_clock
from agent.notify.dedup import DedupWindow
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from config import settings_from_mapping
from models import AlertEvent, AlertKind, PoolSpec, Severity
from tests.fakes.stepping_clock import SteppingClock

T = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
AHEAD = timedelta(hours=6)


def _pools() -> dict[str, PoolSpec]:
    """a100: a lead time of 5 minutes, backed off 10 at most (MIN_BACKOFF); tpu: 30 minutes, backed off 30."""
    pools = [
        {"id": pool_id, "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 10, "price_per_chip_hour_usd": 1.0,
         "lead_time": lead, "serves": ["train"]}
        for pool_id, lead in (("a100", "5m"), ("tpu", "30m"))
    ]  # fmt: skip
    settings = settings_from_mapping({"demand_classes": [{"name": "train"}], "pools": pools}, source="two pools")
    return {spec.pool_id: spec for spec in settings.pool_specs()}


def _missing(at: datetime) -> AlertEvent:
    return AlertEvent(AlertKind.MISSING_DATA, Severity.WARNING, at, "demand class train", "no data")


def test_the_memory_moves_times_written_ahead_back_within_the_clock(caplog: pytest.LogCaptureFixture) -> None:
    late = T + AHEAD
    memory = (
        PlannerMemory()
        .back_off("a100", late + timedelta(minutes=10))
        .back_off("tpu", T + timedelta(minutes=20), BackoffReason.FAILING_CHANGES)  # within its 30 minutes: kept
        .changed("a100", late, +1)
        .changed("tpu", T - timedelta(minutes=1), -1)
        .failing("a100", late, late)
        .units_failed("tpu", late)
    )
    with caplog.at_level(logging.WARNING, logger="agent.memory_clock"):
        within = memory_within_clock(memory, T, _pools())
    assert within.backoff_until == {"a100": T + timedelta(minutes=10), "tpu": T + timedelta(minutes=20)}
    assert within.backoff_reason == memory.backoff_reason
    assert within.last_change == {"a100": (T, +1), "tpu": (T - timedelta(minutes=1), -1)}
    assert (within.failing_since, within.last_failure) == ({"a100": T}, {"a100": T})
    assert (within.units_failing_since, within.units_failed_last) == ({"tpu": T}, {"tpu": T})
    assert not within.in_backoff("a100", T + timedelta(minutes=10))  # 6 h 10 min before
    [warning] = caplog.records
    assert "times up to 6:00:00 later than now (2026-03-02T09:00:00+00:00)" in warning.getMessage()
    assert "pool a100 backed off until 2026-03-02T15:10:00+00:00" in warning.getMessage()
    assert memory_within_clock(within, T, _pools()) is within  # nothing ahead any more: itself


def test_a_time_a_few_seconds_ahead_is_moved_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    skewed = PlannerMemory().changed("a100", T + timedelta(seconds=2), +1)  # saved by a replica 2 s ahead
    with caplog.at_level(logging.WARNING, logger="agent.memory_clock"):
        assert memory_within_clock(skewed, T, _pools()).last_change == {"a100": (T, +1)}
    assert caplog.records == []


def test_an_end_told_ahead_does_not_hold_the_next_end_for_the_step() -> None:
    tracker = ConditionTracker(resolve_after=timedelta(minutes=5), window=timedelta(hours=1))
    late = T + AHEAD
    tracker.update(late, [_missing(late)])
    assert tracker.update(late + timedelta(minutes=5), [])  # its end, told while the clock was ahead
    # corrected: the condition comes back and goes again; one end per window, counted from the correction at most
    tracker.update(T, [_missing(T)])
    ends = [m for m in range(1, 8 * 60) if tracker.update(T + timedelta(minutes=m), [])]
    assert ends[:1] == [60]  # 7 h 5 min before: the end told ahead held it back for a window on the stepped clock


def test_a_condition_told_ahead_is_told_again_a_window_after_on_the_monotonic_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = SteppingClock(T)
    told = DedupWindow(timedelta(hours=1), monotonic=clock.monotonic)
    clock.step(AHEAD)
    told.handled(_missing(clock.now()))  # told while the clock was 6 h ahead
    clock.step(-AHEAD)
    with caplog.at_level(logging.WARNING, logger="agent.notify.dedup"):
        clock.run(timedelta(minutes=30))
        assert told.is_repeat(_missing(clock.now()))  # told 30 minutes ago
        clock.run(timedelta(minutes=30))
        assert not told.is_repeat(_missing(clock.now()))  # an hour ago: told again (silent until 7 h before)
    [warning] = caplog.records  # the step, once
    assert "5:30:00 older than the last one handled (2026-03-02T15:00:00+00:00), 0:30:00 ago" in warning.getMessage()
