"""A scale-up reservation left by an agent that died beside a broken unit, taken over once that unit is gone.

West's pool holds 7 serving units and a broken TPU slice (billed, serving nothing: 8 units billed). The planner buys
4 more (target 7 -> 11) and west dies after the resize, before its tick's commit. Its successor reads the pool at 11,
the broken slice deleted meanwhile as its alert asks: 11 units billed. The scale-up was labelled with the units the
pool was to bill, the broken slice included ('to 12'), and compared with the 11 its successor bills, so the dead
scale-up's 15,360 USD stayed beside the successor's standing reservation of the same units until it expired (east
counted 15 units of west's to the month's end, 57,593 USD, where 11 are: 42,233). A scale-up is now labelled and taken
over on the units its pool bills other than broken units and nodes being drained, which may be gone by the time a
successor reads the pool without the units bought going anywhere. Each row is still deleted only in the transaction
that reserves the pool at no fewer units than its label."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.budget_watch import BudgetWatch
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import StandingHolder
from config import settings_from_mapping
from config.schema import Settings
from models import CapacityPlan, PoolState, Resize
from tests import shared_budget_rig as rig
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES
NOW = datetime(2024, 2, 10, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)
MONTH_END = datetime(2024, 3, 1, tzinfo=UTC)
SCALE_UP = Resize("west", 7, 11, "demand", "west@t->11")


def _settings() -> Settings:
    return settings_from_mapping(rig.shared_budget_config("west", "east", monthly_cap_usd=1e9), source="west")


def _watch(ledger: PostgresLedger) -> BudgetWatch:
    settings = _settings()
    return BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, holder="leadtime")


def _dies_after_scaling_up(ledger: PostgresLedger, state: PoolState) -> None:
    """West reserves its scale-up, resizes, and dies before its tick's commit."""
    plan = CapacityPlan(NOW, resizes=(SCALE_UP,), targets={"west": 11})
    reserved = _watch(ledger).reserve(NOW, plan, {"west": state})
    assert reserved.plan.resizes == (SCALE_UP,)


def _holders(ledger: PostgresLedger) -> list[str]:
    rows = ledger._query("SELECT DISTINCT holder FROM leadtime_budget_reservations WHERE budget = 'team'", ())
    return sorted(str(holder) for (holder,) in rows)


def _west_units_east_counts(ledger: PostgresLedger) -> float:
    """West's units east counts to the month's end (east's own deployment holds pool east)."""
    east = StandingHolder("leadtime", ("east",))
    per_unit = rig.UNIT_HOUR_USD * (MONTH_END - LATER) / timedelta(hours=1)
    return ledger.reserved_by_others(["team"], LATER, east) / per_unit


BROKEN = (("w-3", "short of hosts"),)


@pytest.mark.parametrize(
    ("successor_reads", "west_units"),
    [
        # the broken slice deleted as its alert asks: 11 billed, as many as the scale-up bought serving
        (PoolState("west", LATER, ready_units=11, target_units=11), 11),
        # the broken slice still there: 12 billed
        (PoolState("west", LATER, ready_units=7, target_units=11, broken_units=BROKEN), 12),
    ],
)
def test_a_successor_takes_over_a_scale_up_made_beside_a_broken_unit(
    postgres_database: Database, successor_reads: PoolState, west_units: int
) -> None:
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        # 7 serving and a broken slice: 8 billed, 4 bought
        _dies_after_scaling_up(ledger, PoolState("west", NOW, ready_units=7, target_units=7, broken_units=BROKEN))
        assert _holders(ledger) == ["leadtime (scale-up of west to 11)"]
        _watch(ledger).acted(LATER, CapacityPlan(LATER), [], {"west": successor_reads})
        assert _holders(ledger) == ["leadtime (units held of west)"]
        assert _west_units_east_counts(ledger) == pytest.approx(west_units)


TWO_BROKEN = (*BROKEN, ("w-9", "short of hosts"))


@pytest.mark.parametrize(
    "successor_reads",
    [
        # the resize never reached the cloud: 7 serving and the broken slice, 8 billed
        PoolState("west", LATER, ready_units=7, target_units=7, broken_units=BROKEN),
        # 10 of the 11 units asked for, and a second slice broken since: 12 billed, but not the units the scale-up
        # was to bring, whose reservation is left for them
        PoolState("west", LATER, ready_units=8, target_units=10, broken_units=TWO_BROKEN),
    ],
)
def test_a_scale_up_whose_units_the_successor_does_not_read_is_left_to_expire(
    postgres_database: Database, successor_reads: PoolState
) -> None:
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        _dies_after_scaling_up(ledger, PoolState("west", NOW, ready_units=7, target_units=7, broken_units=BROKEN))
        _watch(ledger).acted(LATER, CapacityPlan(LATER), [], {"west": successor_reads})
        assert _holders(ledger) == ["leadtime (scale-up of west to 11)", "leadtime (units held of west)"]
        # the successor's units billed, and the 4 of the scale-up counted from its start (as east carries them)
        expected = successor_reads.billed_units + 4 * (MONTH_END - NOW) / (MONTH_END - LATER)
        assert _west_units_east_counts(ledger) == pytest.approx(expected)
