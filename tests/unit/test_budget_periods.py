"""Budget periods (month from a start day in a time zone, clock hour), projection, and scale-up charges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agent.planning.budget import Budget, CapKind, Period, project, scale_up_charges
from config import BudgetSettings
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec, Resize

NY = ZoneInfo("America/New_York")


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "start_day", "tz", "start", "end"),
    [
        pytest.param(utc(2024, 3, 5, 12), 1, UTC, utc(2024, 3, 1), utc(2024, 4, 1), id="calendar month"),
        pytest.param(utc(2024, 12, 31, 23, 59), 1, UTC, utc(2024, 12, 1), utc(2025, 1, 1), id="year end"),
        pytest.param(utc(2024, 3, 14, 23), 15, UTC, utc(2024, 2, 15), utc(2024, 3, 15), id="before start day"),
        pytest.param(utc(2024, 3, 15, 0), 15, UTC, utc(2024, 3, 15), utc(2024, 4, 15), id="on start day"),
        # New York: EST (UTC-5) until 10 March 2024, EDT (UTC-4) after, so the period is an hour short.
        pytest.param(utc(2024, 3, 20, 3), 1, NY, utc(2024, 3, 1, 5), utc(2024, 4, 1, 4), id="across DST"),
        # 04:30 UTC on 1 March is still 29 February in New York.
        pytest.param(utc(2024, 3, 1, 4, 30), 1, NY, utc(2024, 2, 1, 5), utc(2024, 3, 1, 5), id="local day"),
    ],
)
def test_month_period(now: datetime, start_day: int, tz: ZoneInfo, start: datetime, end: datetime) -> None:
    budget = Budget("b", frozenset({"p"}), monthly_cap_usd=1.0, period_start_day=start_day, tz=tz)
    assert budget.period(now) == Period(start, end)


def test_hour_follows_the_local_clock_in_a_half_hour_zone() -> None:
    budget = Budget("b", frozenset({"p"}), hourly_cap_usd=1.0, tz=ZoneInfo("Asia/Kolkata"))
    assert budget.hour(utc(2024, 3, 5, 10, 10)) == Period(utc(2024, 3, 5, 9, 30), utc(2024, 3, 5, 10, 30))
    assert budget.hour(utc(2024, 3, 5, 10, 30)) == Period(utc(2024, 3, 5, 10, 30), utc(2024, 3, 5, 11, 30))


def test_from_settings_reads_zone_day_and_caps() -> None:
    settings = BudgetSettings(
        name="team-a",
        pools=("p", "q"),
        monthly_cap_usd=100.0,
        hourly_cap_usd=2.0,
        period_start_day=3,
        timezone="Europe/Berlin",
        alert_thresholds=(0.9, 0.5),
    )
    budget = Budget.from_settings(settings)
    assert budget.pools == frozenset({"p", "q"})
    assert budget.alert_thresholds == (0.5, 0.9)
    kinds = [kind for kind, _, _ in budget.caps(utc(2024, 3, 5))]
    assert kinds == [CapKind.MONTH, CapKind.HOUR]
    assert budget.period(utc(2024, 3, 5)).start == utc(2024, 3, 2, 23)  # Berlin midnight is 23:00 UTC in winter


def test_naive_time_is_refused() -> None:
    budget = Budget("b", frozenset({"p"}), monthly_cap_usd=1.0)
    with pytest.raises(ValueError, match="tz-aware"):
        budget.period(datetime(2024, 3, 5))


def test_projection_runs_units_to_the_period_end_and_releases_settle_for_a_tick() -> None:
    period = Period(utc(2024, 3, 1), utc(2024, 3, 1, 10))
    now = utc(2024, 3, 1, 6)
    prices = {"a": 2.0, "b": 10.0}
    # 4 hours left: a holds 3 units (24 USD), b holds 1 (40 USD).
    assert project(5.0, period, now, ["a", "b"], {"a": 3, "b": 1}, prices) == pytest.approx(69.0)
    # b asked to go from 4 to 1 units: bills 4 for the first 6 minutes, then 1.
    held = project(5.0, period, now, ["a", "b"], {"a": 3, "b": 1}, prices, {"b": 4}, timedelta(minutes=6))
    assert held == pytest.approx(69.0 + 3 * 10.0 * 0.1)
    # Nothing is left after the period ends; all of it is left before it starts.
    assert project(5.0, period, utc(2024, 3, 2), ["a"], {"a": 3}, prices) == 5.0
    assert project(0.0, period, utc(2024, 2, 28), ["a"], {"a": 1}, prices) == pytest.approx(20.0)


def _spec(pool_id: str, price: float) -> PoolSpec:
    return PoolSpec(
        pool_id, PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 10, price,
        timedelta(minutes=10), ("c",),
    )  # fmt: skip


def test_scale_up_charges_name_the_costliest_first_within_the_budget_and_period() -> None:
    budget = Budget("b", frozenset({"a", "b"}), monthly_cap_usd=1000.0)
    period = Period(utc(2024, 3, 1), utc(2024, 3, 2))
    pools = {"a": _spec("a", 1.0), "b": _spec("b", 5.0), "z": _spec("z", 100.0)}
    history = [
        (utc(2024, 3, 1, 12), Resize("a", 1, 3, "forecast", "k1")),  # 2 units x 12 h x 1 = 24
        (utc(2024, 3, 1, 20), Resize("b", 0, 2, "forecast", "k2")),  # 2 units x 4 h x 5 = 40
        (utc(2024, 3, 1, 21), Resize("b", 2, 1, "idle", "k3")),  # a release: not a driver
        (utc(2024, 3, 1, 22), Resize("z", 0, 9, "forecast", "k4")),  # not in the budget
        (utc(2024, 2, 29, 22), Resize("a", 0, 1, "forecast", "k5")),  # before the period
    ]
    charges = scale_up_charges(history, pools, budget, period)
    assert [(c.pool_id, round(c.cost_usd, 6)) for c in charges] == [("b", 40.0), ("a", 24.0)]
    assert charges[0].describe() == "2024-03-01 20:00 UTC b 0->2 units (+40.00 USD to period end)"
