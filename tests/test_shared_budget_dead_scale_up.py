"""A scale-up reservation left by an agent that died before its tick's commit, on the real PostgreSQL ledger.

West and east each hold 8 units at 8 USD a unit-hour from February 10 under a monthly cap that leaves room for about
8 more units to the month's end. At 00:00 west scales up to 12 (4 units reserved, 15,360 USD to the month's end) and
dies before the tick's commit would have replaced that reservation with its standing one; it restarts at 00:05
holding the 12 units, and its first commit reserves them. East wants 12 from 00:10: the room left is about 4.5 units.
The dead scale-up's reservation was held under west's Lease name alone, which another install may share, so the
restarted west could not take it for its own: it counted as another agent's until it expired (``ledger
.reservation_ttl``, 1h), on top of west's standing reservation of the same units, and east was held at 8 from 00:10
to 01:00. A scale-up is now held as ``west (scale-up of west to 12)``, and the restarted west's first commit, which
reserves the pool at 12 units, replaces it: east grows at 00:10. A scale-up whose units the successor does not
reserve (the pool read at fewer: a resize never sent, or units still to come) is left to expire, as before."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from agent.budget_reserve import BudgetReserver
from agent.budget_reserve_caps import Releasing
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

START = datetime(2024, 2, 10, tzinfo=UTC)
MONTH_END = datetime(2024, 3, 1, tzinfo=UTC)
UNIT_TO_MONTH_END = rig.UNIT_HOUR_USD * (MONTH_END - START) / timedelta(hours=1)  # 3,840 USD
CAP = (8 + 8 + 8.5) * UNIT_TO_MONTH_END  # both fleets, and 8.5 units more


class Died(Exception):
    """The process ended: nothing after it in the tick happened."""


class DyingReserver(BudgetReserver):
    """West's reserver in the tick its process dies: after the executor acted, before the commit."""

    def commit(
        self,
        now: datetime,
        units: Mapping[str, int],
        covered: Mapping[str, int] | None = None,
        releasing: Releasing | None = None,
    ) -> None:
        raise Died


@POSTGRES
def test_a_dead_agents_scale_up_reservation_is_taken_over_by_its_successor_and_the_other_grows(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    history = (START - timedelta(hours=2)).isoformat()
    west_trace = write_trace({"train": [96.0] * 60}, start=history, name="west.csv")
    east_trace = write_trace({"train": [64.0] * 25 + [96.0] * 35}, start=history, name="east.csv")
    with rig.postgres_ledgers(postgres_database) as (west_ledger, east_ledger):
        west_config = rig.shared_budget_config("west", "east", monthly_cap_usd=CAP)
        west = rig.member(west_config, "west", west_trace, west_ledger, START, units=8)
        east = rig.member(
            rig.shared_budget_config("east", "west", monthly_cap_usd=CAP), "east", east_trace, east_ledger, START, 8
        )
        rig.tick([east], START)
        reserver = west.agent.budget_watch.reserver
        assert reserver is not None
        west.agent.budget_watch.reserver = DyingReserver(
            reserver.ledger, reserver.budgets, reserver.pools, "west", reserver.ttl, reserver.previous_ids
        )
        west.clock.set(START)
        with pytest.raises(Died):
            west.agent.run_once(START)
        assert west.cluster.list_pools()[0].target_units == 12
        restarted = rig.member(west_config, "west", west_trace, west_ledger, START, units=12)
        east_units: dict[datetime, int] = {}
        east_refused: list[str] = []
        now = START + timedelta(minutes=5)
        while now <= START + timedelta(hours=1, minutes=10):
            east_refused += rig.refused(rig.tick([restarted, east], now)["east"])
            east_units[now] = east.cluster.list_pools()[0].target_units
            now += timedelta(minutes=5)
    grown_at = min(at for at, units in east_units.items() if units > 8)
    # east grows at its first tick that wants to (00:10), its 4 units granted: west's restarted agent replaced its
    # dead scale-up's reservation in its first commit, reserving the pool at the 12 units it was to bring it to
    # (was held at 8, 'allows 0 of 4', at every tick until the reservation expired at 01:00)
    assert grown_at == START + timedelta(minutes=10)
    assert east_units[grown_at] == 12
    assert east_refused == []
