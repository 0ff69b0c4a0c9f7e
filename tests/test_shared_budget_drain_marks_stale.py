"""A drain's units are marked as being released at the tick it starts and the next one only, and those two ticks are
consecutive ticks of one replica's term as leader. The agent remembered what its last commit started releasing with
no time: after a tick that failed before committing, a blocked drain was marked again at its third tick, and a
replica leading again took the drains another leader started for its own and marked them. The units started are now
kept with their tick and honoured from the tick immediately before only (1.5 ticks at most), and forgotten when the
replica stands by.

West's release of 3 units at 12:00 is carried out as 3 drains that stay blocked; east reads west's marks, from two
connections to one real PostgreSQL ledger."""

from __future__ import annotations

from datetime import datetime, timedelta

from agent.budget_reserve import BudgetReserver
from agent.budget_reserve_caps import releasing_units
from agent.budget_watch import BudgetWatch
from agent.ledger.postgres import PostgresLedger
from config import settings_from_mapping
from models import CapacityPlan, PoolState
from tests import shared_budget_rig as rig
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_blocked_drain_marks import START, TICK, _reserver, _west_tick

MONTH_END = datetime(2024, 2, 1, tzinfo=START.tzinfo)


def _marked_from(at: datetime) -> float:
    """What east reads of a mark of west's 3 units made at ``at``: their price from the next tick to the month's end."""
    return 3 * rig.UNIT_HOUR_USD * (MONTH_END - (at + TICK)).total_seconds() / 3600


def _draining(west: BudgetReserver, now: datetime) -> None:
    """West's commit at ``now`` with 3 nodes being drained and no release started this tick."""
    state = PoolState("west", now, ready_units=5, target_units=5, draining_units=3)
    west.commit(now, {"west": state.billed_units}, releasing=releasing_units(CapacityPlan(now), [], {"west": state}))


@POSTGRES
def test_a_tick_that_commits_nothing_does_not_carry_a_drains_mark_to_its_third_tick(
    postgres_database: Database,
) -> None:
    west_ledger = PostgresLedger(postgres_database.url, postgres_database.password)
    east_ledger = PostgresLedger(postgres_database.url, postgres_database.password)
    try:
        west, east = _reserver(west_ledger, "west", "east"), _reserver(east_ledger, "east", "west")
        _west_tick(west, START)  # 12:00: the release, its 3 drains started, then blocked
        seen = [east.releasing_elsewhere(START + timedelta(minutes=1))["team"]]
        # 12:05: west's tick fails before it commits (a pool or the ledger could not be read)
        seen.append(east.releasing_elsewhere(START + TICK + timedelta(minutes=1))["team"])
        _draining(west, START + 2 * TICK)  # 12:10, the drains' third tick, still blocked
        seen += [east.releasing_elsewhere(START + timedelta(minutes=m))["team"] for m in (11, 16)]
    finally:
        west_ledger.close()
        east_ledger.close()

    # the 12:00 mark for its two ticks, then none (before: marked again at 12:10, read at 12:11 and 12:16)
    assert [round(usd, 2) for usd in seen] == [round(_marked_from(START), 2)] * 2 + [0.0, 0.0]


@POSTGRES
def test_a_replica_leading_again_does_not_mark_the_drains_under_way(postgres_database: Database) -> None:
    settings = settings_from_mapping(rig.shared_budget_config("west", "east", monthly_cap_usd=1e6))
    west_ledger = PostgresLedger(postgres_database.url, postgres_database.password)
    east_ledger = PostgresLedger(postgres_database.url, postgres_database.password)
    try:
        watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, west_ledger, "cluster-west", TICK)
        assert watch.reserver is not None
        east = _reserver(east_ledger, "east", "west")
        _west_tick(watch.reserver, START)  # 12:00: this replica leads and releases 3 units as drains
        watch.stand_by()  # 12:02: it loses the Lease; another replica leads and starts drains of its own
        _draining(watch.reserver, START + timedelta(minutes=6))  # 12:06: it leads again and finds 3 nodes draining
        marked = east.releasing_elsewhere(START + timedelta(minutes=11))["team"]  # the 12:00 mark has lapsed
    finally:
        west_ledger.close()
        east_ledger.close()

    assert marked == 0.0  # before: the drains under way taken for the ones it started at 12:00, marked at 12:06


@POSTGRES
def test_a_fresh_replica_marks_none_of_the_drains_under_way(postgres_database: Database) -> None:
    west_ledger = PostgresLedger(postgres_database.url, postgres_database.password)
    east_ledger = PostgresLedger(postgres_database.url, postgres_database.password)
    try:
        first, east = _reserver(west_ledger, "west", "east"), _reserver(east_ledger, "east", "west")
        _west_tick(first, START)
        second = _reserver(west_ledger, "west", "east")  # a new replica takes over at 12:05
        seen = []
        for i in (1, 2):
            _draining(second, START + i * TICK)
            seen.append(east.releasing_elsewhere(START + i * TICK + timedelta(minutes=1))["team"])
    finally:
        west_ledger.close()
        east_ledger.close()

    assert seen == [0.0, 0.0]  # its first commit replaced the deployment's mark of 12:00, and marked nothing
