"""Releasing whole slices by the forecast: the peak quantile, the probability a slice is needed again within its
lead time, and the break-even rule, on hand-computed examples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.planning import PlanInput, PlannerMemory, plan_capacity
from agent.planning.slice_release import SliceRelease
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityPlan, CapacityTier, DemandForecast, PoolKind, PoolSpec, PoolState

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)
STEP = timedelta(minutes=5)
FLAT = (50.0,) * 7  # lead 30 minutes + a 5-minute tick: 7 steps


def _forecast(peaks: dict[float, float], per_step: tuple[float, ...] = FLAT) -> DemandForecast:
    """Per-step quantiles ``per_step`` at every level; the peak over all 7 steps as given (rising to it)."""
    return DemandForecast(
        "a",
        NOW,
        STEP,
        dict.fromkeys(peaks, per_step),
        per_step[0],
        "test",
        peaks={q: (*(per_step[0],) * 6, v) for q, v in peaks.items()},
    )


PEAKS = {0.5: 60.0, 0.9: 90.0, 0.99: 100.0}


def test_the_peak_is_the_published_peak_quantile_never_below_the_per_step_one() -> None:
    forecast = _forecast(PEAKS)
    assert forecast.peak(0.9) == 90.0
    assert forecast.peak(0.9, steps=3) == 50.0
    assert forecast.peak(0.95) == 100.0  # the next level up: more protection, never less
    low = _forecast({0.9: 40.0})  # a peak below a per-step quantile is not believed
    assert low.peak(0.9) == 50.0
    bare = DemandForecast("a", NOW, STEP, {0.9: (10.0, 30.0, 20.0)}, 10.0, "test")
    assert bare.peak(0.9) == 30.0  # without peaks: the highest per-step quantile, as before


def test_exceedance_reads_the_peak_distribution_between_levels_and_bounds_it_safely_beyond() -> None:
    forecast = _forecast(PEAKS)
    assert forecast.exceedance(96.0) == pytest.approx(1.0 - (0.9 + 0.09 * 6 / 10))  # 0.046
    assert forecast.exceedance(64.0) == pytest.approx(1.0 - (0.5 + 0.4 * 4 / 30))
    assert forecast.exceedance(10.0) == pytest.approx(0.5)  # below every level: at least 1 - 0.5
    # Above every level: an exponential tail through the two highest (0.1 at 90 chips, 0.01 at 100).
    assert forecast.exceedance(110.0) == pytest.approx(0.001)
    assert forecast.exceedance(100.0) == pytest.approx(0.01)
    flat = DemandForecast("a", NOW, STEP, {0.5: (50.0,), 0.9: (50.0,)}, 50.0, "persistence")
    assert flat.exceedance(50.0) == pytest.approx(0.1) and flat.exceedance(51.0) == 0.0  # no spread claimed


def test_slices_go_one_by_one_while_the_chance_they_are_needed_again_is_below_break_even() -> None:
    rule = SliceRelease(_forecast(PEAKS), service_level=0.9, steps=7)
    assert rule.break_even == pytest.approx(0.1)
    # 4 slices of 32 chips; without one 96 chips are left (needed again with probability 0.046 < 0.1: release);
    # without two 64 are left (0.447: hold).
    assert rule.releasable(current=4, wanted=2, chips_per_unit=32)[0] == 1
    released, why = SliceRelease(_forecast(PEAKS), service_level=0.99, steps=7).releasable(4, 2, 32)
    assert released == 0  # at 0.99 the break-even is 0.01: 0.046 is too likely
    assert "0.046" in why and "break-even 0.01" in why
    # A service level at the highest forecast level still releases once enough chips are left: of 5 slices of 32,
    # without one 128 chips are left, well above the q0.99 peak of 100.
    assert SliceRelease(_forecast(PEAKS), service_level=0.99, steps=7).releasable(5, 1, 32)[0] == 1


def _slices(
    idle_minutes: tuple[int, ...],
    settings: PlannerSettings,
    service_level: float = 0.9,
    peaks: dict[float, float] = PEAKS,
) -> CapacityPlan:
    pool = PoolSpec(
        "slices", PoolKind.TPU_SLICE_GROUP, CapacityTier.ON_DEMAND, AcceleratorFamily.TPU, 32, 0, 16, 38.4,
        timedelta(minutes=30), ("a",),
    )  # fmt: skip
    state = PoolState(
        "slices",
        NOW,
        4,
        4,
        idle_units=len(idle_minutes),
        idle_since=tuple(NOW - timedelta(minutes=m) for m in idle_minutes),
    )
    return plan_capacity(
        PlanInput(
            now=NOW, tick=STEP, pools=[pool], states={"slices": state}, forecasts={"a": _forecast(peaks)},
            observed={"a": 50.0}, service_levels={"a": service_level}, settings=settings, memory=PlannerMemory(),
        )
    )  # fmt: skip


def test_an_idle_slice_is_released_by_the_forecast_only_once_idle_for_the_hold() -> None:
    # Two 30-minute lead times of idleness first (the idle hold); then the forecast lets the fourth slice go (with
    # 96 chips left the peak is exceeded with probability 0.046, below the break-even 0.1).
    by_forecast = PlannerSettings(slice_release_by_forecast=True)
    assert _slices((15, 15), by_forecast).resizes == ()  # past the stabilization window, inside the hold
    (resize,) = _slices((65, 65), by_forecast).resizes
    assert (resize.from_units, resize.to_units) == (4, 3)  # the q0.9 peak (90 chips) needs 3 slices
    # With no hold (idle_hold_lead_times 0) the forecast releases it once past the stabilization window alone.
    quick = PlannerSettings(slice_release_by_forecast=True, idle_hold_lead_times=0.0)
    (resize,) = _slices((15, 15), quick).resizes
    assert (resize.from_units, resize.to_units) == (4, 3)
    assert _slices((5, 5), quick).resizes == ()  # still inside the stabilization window


def test_a_slice_the_forecast_may_need_again_at_the_break_even_is_held_where_the_hold_alone_releases_it() -> None:
    # Planned at 0.9 with a q0.9 peak of exactly 64 chips: sizing asks for 2 slices, so the hold alone releases two
    # of the four. Without the third slice 64 chips are left, exceeded with probability 1 - 0.9 = 0.1: not below
    # the break-even 0.1, so the forecast holds it and releases one.
    peaks = {0.5: 40.0, 0.9: 64.0, 0.99: 100.0}
    alone = _slices((65, 65), PlannerSettings(slice_release_by_forecast=False), peaks=peaks)
    (resize,) = alone.resizes
    assert (resize.from_units, resize.to_units) == (4, 2)
    (resize,) = _slices((65, 65), PlannerSettings(), peaks=peaks).resizes  # on by default
    assert (resize.from_units, resize.to_units) == (4, 3)
