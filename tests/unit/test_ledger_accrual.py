"""Accrual of spend from pool readings: last-known capacity, marks, gaps, grid splits, replays."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.ledger import InMemoryLedger
from agent.ledger.accrual import PoolReading, accrue, is_mark, resolve, split
from agent.ledger.meter import SpendMeter
from models import LedgerEntry

T0 = datetime(2024, 3, 5, 10, 1, tzinfo=UTC)
MIN = timedelta(minutes=1)
GAP = timedelta(minutes=5)
PRICE = 12.0  # USD per unit-hour: one unit for one minute costs 0.20


def approx_usd(expected: float) -> float:
    """``pytest.approx(expected)`` where a ``LedgerEntry`` wants its float cost: it equals the floats near it."""
    return cast(float, pytest.approx(expected))


def reading(at: datetime, units: int, pool: str = "a") -> PoolReading:
    return PoolReading(pool, at, units, PRICE)


def test_first_reading_only_opens_a_mark() -> None:
    accrual = accrue(None, reading(T0, 4), GAP)
    assert accrual.entries == (LedgerEntry("a", T0, T0, 4, 0.0),)
    assert is_mark(accrual.entries[0])
    assert accrual.gap is None


def test_interval_is_charged_the_capacity_known_at_its_start() -> None:
    mark = LedgerEntry("a", T0, T0, 4, 0.0)
    accrual = accrue(mark, reading(T0 + MIN, 9), GAP)
    assert accrual.entries[0] == LedgerEntry("a", T0, T0 + MIN, 4, approx_usd(4 * 0.20))
    assert accrual.entries[1] == LedgerEntry("a", T0 + MIN, T0 + MIN, 9, 0.0)
    assert accrual.cost_usd == pytest.approx(0.80)


def test_marks_at_one_instant_keep_the_larger_capacity() -> None:
    ledger = InMemoryLedger()
    meter = SpendMeter(ledger, GAP)
    meter.observe([reading(T0, 2)])  # observed
    meter.observe([reading(T0, 6)])  # the agent's own scale-up right after
    meter.observe([reading(T0, 3)])  # a late duplicate observation does not lower it
    meter.observe([reading(T0 + MIN, 6)])
    assert ledger.spent(["a"], T0, T0 + MIN) == pytest.approx(6 * 0.20)


def test_a_release_is_charged_until_the_next_observation() -> None:
    ledger = InMemoryLedger()
    meter = SpendMeter(ledger, GAP)
    meter.observe([reading(T0, 5)])
    meter.observe([reading(T0, 1)])  # asked to shrink: still billed 5 until seen smaller
    meter.observe([reading(T0 + MIN, 1)])
    meter.observe([reading(T0 + 2 * MIN, 1)])
    assert ledger.spent(["a"], T0, T0 + MIN) == pytest.approx(5 * 0.20)
    assert ledger.spent(["a"], T0 + MIN, T0 + 2 * MIN) == pytest.approx(1 * 0.20)


@pytest.mark.parametrize(
    ("after", "held"),
    [
        pytest.param(7, 7, id="pool came back larger: charged the larger all through"),
        pytest.param(1, 3, id="pool came back smaller: last known capacity ran through"),
    ],
)
def test_a_gap_is_charged_conservatively(after: int, held: int) -> None:
    mark = LedgerEntry("a", T0, T0, 3, 0.0)
    accrual = accrue(mark, reading(T0 + 30 * MIN, after), GAP)
    assert accrual.gap == 30 * MIN
    assert {e.units for e in accrual.entries if not is_mark(e)} == {held}
    assert accrual.cost_usd == pytest.approx(held * PRICE * 0.5)


def test_an_interval_shorter_than_the_gap_threshold_is_not_a_gap() -> None:
    mark = LedgerEntry("a", T0, T0, 3, 0.0)
    accrual = accrue(mark, reading(T0 + GAP, 8), GAP)
    assert accrual.gap is None
    assert accrual.entries[0].units == 3


def test_intervals_are_cut_on_the_quarter_hour_grid() -> None:
    start = datetime(2024, 3, 5, 10, 5, tzinfo=UTC)
    end = datetime(2024, 3, 5, 10, 35, tzinfo=UTC)
    assert [(s.minute, e.minute) for s, e in split(start, end)] == [(5, 15), (15, 30), (30, 35)]
    assert split(start, start) == []
    on_grid = datetime(2024, 3, 5, 10, 15, tzinfo=UTC)
    assert split(on_grid, on_grid + 15 * MIN) == [(on_grid, on_grid + 15 * MIN)]


def test_a_month_boundary_in_a_half_hour_zone_starts_an_entry() -> None:
    # Midnight of 1 April in Asia/Kolkata (UTC+05:30) is 18:30 UTC on 31 March.
    boundary = datetime(2024, 3, 31, 18, 30, tzinfo=UTC)
    mark = LedgerEntry("a", boundary - 40 * MIN, boundary - 40 * MIN, 2, 0.0)
    accrual = accrue(mark, reading(boundary + 20 * MIN, 2), timedelta(hours=2))
    assert boundary in {e.start for e in accrual.entries}


def test_readings_older_than_the_ledger_add_nothing() -> None:
    last = LedgerEntry("a", T0, T0 + MIN, 4, 0.8)
    assert accrue(last, reading(T0, 9), GAP).entries == ()


@pytest.mark.parametrize(
    "bad",
    [
        PoolReading("a", datetime(2024, 3, 5, 10, 0), 1, 1.0),
        PoolReading("a", T0, -1, 1.0),
        PoolReading("a", T0, 1, -1.0),
    ],
)
def test_bad_readings_are_refused(bad: PoolReading) -> None:
    with pytest.raises(ValueError, match="pool 'a'"):
        accrue(None, bad, GAP)


def test_an_entry_of_another_pool_is_refused() -> None:
    with pytest.raises(ValueError, match="pool 'b'"):
        accrue(LedgerEntry("b", T0, T0, 1, 0.0), reading(T0 + MIN, 1), GAP)


_entry = st.builds(
    LedgerEntry,
    pool_id=st.just("a"),
    start=st.just(T0),
    end=st.sampled_from([T0, T0 + MIN, T0 + 2 * MIN]),
    units=st.integers(0, 5),
    cost_usd=st.floats(0, 10, allow_nan=False),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_entry, min_size=1, max_size=5))
def test_what_a_key_stores_does_not_depend_on_arrival_order(entries: list[LedgerEntry]) -> None:
    outcomes = set()
    for order in itertools.permutations(entries):
        stored: LedgerEntry | None = None
        for entry in order:
            stored = resolve(stored, entry) or stored
        assert stored is not None
        outcomes.add((is_mark(stored), stored.units if is_mark(stored) else None))
    # Marks always settle on the same one (the largest); which real entry wins is decided by arrival, but a
    # real entry always beats a mark.
    assert len({o[0] for o in outcomes}) == 1
    if all(is_mark(e) for e in entries):
        assert outcomes == {(True, max(e.units for e in entries))}


def test_a_tick_longer_than_gap_after_is_an_observation_not_a_gap() -> None:
    """A simulation ticks at its trace's step (10 minutes on the ServeGen trace): with gap_after at its 5-minute
    default, every interval was charged as an unwatched gap, at the larger capacity, with a warning each."""
    from agent.budget_watch import BudgetWatch
    from config import settings_from_mapping
    from models import PoolState

    settings = settings_from_mapping(
        {
            "demand_classes": [{"name": "a"}],
            "pools": [{"id": "a", "kind": "gpu-node-pool", "chips_per_unit": 1, "max_units": 9,
                       "price_per_unit_hour_usd": PRICE, "lead_time": "10m", "serves": ["a"]}],
        }
    )  # fmt: skip
    ledger = InMemoryLedger()
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, tick=10 * MIN)
    watch.observe(T0, {"a": PoolState("a", T0, 1, 1)})
    watch.observe(T0 + 10 * MIN, {"a": PoolState("a", T0 + 10 * MIN, 6, 6)})
    assert ledger.spent(["a"], T0, T0 + 10 * MIN) == pytest.approx(1 * 10 * 0.20)  # not 6 units for the interval
    watch.observe(T0 + 40 * MIN, {"a": PoolState("a", T0 + 40 * MIN, 1, 1)})  # three ticks unwatched: a gap
    assert ledger.spent(["a"], T0 + 10 * MIN, T0 + 40 * MIN) == pytest.approx(6 * 30 * 0.20)
