"""A tick that fails after a release was sent marks it as going for two ticks, as its commit would have.

West and east each hold 8 units (4 busy, 4 idle) of a pool in a budget they share, whose monthly cap the two fleets
together break by 3 units (``tests.test_shared_budget_claims_executor_raised``). At 12:10 west sends its release of 3
units, and its tick then fails: a later resize of the executor raises an error no adapter translates, or the commit
that writes the tick's reservations and marks fails. The release kept its claim, but a claim lives one tick and no
commit replaced it with a mark: east, ticking first at 12:15 (the agents' clocks are their own), read west's units as
staying and released 3 more (6 where 3 were needed), and west bought them back (5 -> 8) at 12:20. The claims of the
releases sent are now replaced, when the tick fails, with their marks as the commit writes them (two ticks): east
releases nothing, and west stays at 5.

Run on two connections to one real PostgreSQL ledger."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from models import LedgerEntry, LedgerUnavailable
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_claims_executor_raised import (
    BUSY,
    GROWN,
    NEEDED,
    SpareResizeRaisesOnce,
    _member,
    _released,
)
from tests.test_shared_budget_shed_once import FLEET, SEEDED_USD, SETTLED, START, TICK

pytestmark = POSTGRES


@pytest.mark.parametrize("fails_in", ["executor", "commit"])
def test_a_release_sent_by_a_failed_tick_stays_marked_when_the_other_agent_ticks_first(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch, fails_in: str
) -> None:
    start = START - timedelta(hours=2)
    batch = [0.0 if start + i * TICK < SETTLED - TICK else GROWN * 8.0 for i in range(80)]  # read at the next tick
    trace = write_trace({"train": [BUSY * 8.0] * 80, "batch": batch}, start=start.isoformat())
    west_units: dict[datetime, int] = {}  # west's budget pool's target after its tick
    east_released: dict[datetime, int] = {}
    failed: list[datetime] = []
    with rig.postgres_ledgers(postgres_database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        west, east = (
            _member(own, other, trace, ledger) for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
        )
        actuator = west.agent.parts.actuator
        assert isinstance(actuator, SpareResizeRaisesOnce)
        reserver = west.agent.budget_watch.reserver
        assert reserver is not None
        if fails_in == "commit":
            actuator.raised.append("none")  # the spare pool's resize goes through
            commit = reserver.commit

            def commit_fails_once(now: datetime, *args: Any, _commit: Callable[..., None] = commit) -> None:
                if now == SETTLED:
                    raise LedgerUnavailable("the ledger's connection was lost at the commit")
                _commit(now, *args)

            monkeypatch.setattr(reserver, "commit", commit_fails_once)
        for i in range(6):
            now = START + i * TICK
            batch_now = GROWN * 8.0 if now >= SETTLED - TICK else 0.0
            for one, demand in ((west, {"train": BUSY * 8.0, "batch": batch_now}), (east, {"train": BUSY * 8.0})):
                one.cluster.serve(now, demand)
                one.clock.set(now)

            def west_ticks(now: datetime = now) -> None:
                try:
                    west.agent.run_once(now)
                except (RuntimeError, LedgerUnavailable):
                    failed.append(now)
                west_units[now] = west.cluster.list_pools()[0].target_units

            def east_ticks(now: datetime = now) -> None:
                east_released[now] = _released(east.agent.run_once(now).plan.resizes, "east")

            for one_ticks in (east_ticks, west_ticks) if now > SETTLED else (west_ticks, east_ticks):
                one_ticks()
        east_units = east.cluster.list_pools()[0].target_units

    assert failed == [SETTLED], failed
    assert west_units[SETTLED] == FLEET - NEEDED, west_units  # sent, then the tick failed
    assert east_released[SETTLED] == 0, east_released  # west's claim kept through its tick's failure
    assert east_released[SETTLED + TICK] == 0, east_released  # 3 before: the claim lapsed, no mark replaced it
    assert sum(east_released.values()) == 0 and east_units == FLEET, east_released
    assert all(units == FLEET - NEEDED for at, units in west_units.items() if at >= SETTLED), west_units  # 8 at 12:20


def test_a_second_failed_tick_in_a_row_leaves_the_first_ones_marks(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """West's commit fails at 12:10, after its release was sent, and its next tick fails too, reading its pools, before
    it claims anything. That tick replaced the marks of 12:10 with nothing: east, ticking after west at 12:15, read
    west's units as staying and released 3 more (6 where 3 were needed), and west bought 3 back (5 -> 8) at 12:25. The
    marks now stay until a commit replaces them, or they lapse."""
    start = START - timedelta(hours=2)
    batch = [0.0 if start + i * TICK < SETTLED - TICK else GROWN * 8.0 for i in range(80)]
    trace = write_trace({"train": [BUSY * 8.0] * 80, "batch": batch}, start=start.isoformat())
    west_units: dict[datetime, int] = {}
    east_released: dict[datetime, int] = {}
    failed: list[datetime] = []
    with rig.postgres_ledgers(postgres_database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        west, east = (
            _member(own, other, trace, ledger) for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
        )
        actuator = west.agent.parts.actuator
        assert isinstance(actuator, SpareResizeRaisesOnce)
        actuator.raised.append("none")  # the spare pool's resize goes through
        reserver = west.agent.budget_watch.reserver
        assert reserver is not None

        def commit_fails_once(now: datetime, *args: Any, _commit: Callable[..., None] = reserver.commit) -> None:
            if now == SETTLED:
                raise LedgerUnavailable("the ledger's connection was lost at the commit")
            _commit(now, *args)

        def pools_unreadable_once(_list_pools: Callable[[], Any] = actuator.list_pools) -> Any:
            if west.clock.now() == SETTLED + TICK:
                raise RuntimeError("the pools' listing could not be read")
            return _list_pools()

        monkeypatch.setattr(reserver, "commit", commit_fails_once)
        monkeypatch.setattr(actuator, "list_pools", pools_unreadable_once)
        for i in range(6):
            now = START + i * TICK
            batch_now = GROWN * 8.0 if now >= SETTLED - TICK else 0.0
            for one, demand in ((west, {"train": BUSY * 8.0, "batch": batch_now}), (east, {"train": BUSY * 8.0})):
                one.cluster.serve(now, demand)
                one.clock.set(now)
            try:
                west.agent.run_once(now)
            except (RuntimeError, LedgerUnavailable):
                failed.append(now)
            west_units[now] = west.cluster.list_pools()[0].target_units
            east_released[now] = _released(east.agent.run_once(now).plan.resizes, "east")
        east_units = east.cluster.list_pools()[0].target_units

    assert failed == [SETTLED, SETTLED + TICK], failed
    assert east_released[SETTLED + TICK] == 0, east_released  # 3 before: the marks of 12:10 wiped at 12:15
    assert sum(east_released.values()) == 0 and east_units == FLEET, east_released
    assert all(units == FLEET - NEEDED for at, units in west_units.items() if at >= SETTLED), west_units  # 8 at 12:25
