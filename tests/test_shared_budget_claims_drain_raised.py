"""A drainer raising part-way through a release keeps the drains started before it, and their claim.

West and east each hold 8 units (4 busy, 4 idle) of a pool in a budget they share, whose monthly cap the two fleets
together break by 3 units (``tests.test_shared_budget_claims_hourly_second_budget``, with no second budget); west's
pool releases by draining nodes. At 12:10 west's release of 3 units drains its first node, and the drain of the
second raises an error no drainer translates, failing the tick. The drains' results were gathered in the scale-down's
own outcome, lost with the error: the release counted as not carried out and its claim was taken back, east released
3 units beside west's first node (4 where 3 were needed), and west bought its node back (7 -> 8) at 12:20. Each
drain's result now reaches the executor's as it is had, the drain that raised counted as possibly begun
(``ActionResult.unclear``): the claim stays, the failed tick marks the 2 units going, east sheds 1 and west's next tick
the last one: 3 in all.

Run on two connections to one real PostgreSQL ledger, west ticking first at each instant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from actuators import SimulatedCluster
from agent.loop import Agent
from models import ActionResult, LedgerEntry
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_claims_hourly_second_budget import (
    BUSY,
    TEAM_NEEDED,
    _config,
    _released,
)
from tests.test_shared_budget_shed_once import FLEET, SEEDED_USD, START, TICK

pytestmark = POSTGRES

SETTLED = START + 2 * TICK  # the idle units are idle for the 10-minute window from here


class SecondDrainRaises:
    """West's drainer: its simulated cluster's, whose second drain raises as a defect in a drainer would, unsent."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self._cluster = cluster
        self.drains: list[str] = []

    def idle_nodes(self, pool_id: str, idle_for: timedelta) -> Sequence[str]:
        return self._cluster.idle_nodes(pool_id, idle_for)

    def pool_nodes(self, pool_id: str) -> Sequence[str]:
        return self._cluster.pool_nodes(pool_id)

    def draining_nodes(self, pool_id: str) -> Mapping[str, str]:
        return self._cluster.draining_nodes(pool_id)

    def cancel(self, pool_id: str, node: str, key: str) -> ActionResult:
        return self._cluster.cancel(pool_id, node, key)

    def drain(self, pool_id: str, node: str, key: str, forced: bool = False) -> ActionResult:
        self.drains.append(node)
        if len(self.drains) == 2:
            raise RuntimeError(f"drain of {node}: the API server's answer could not be read")
        return self._cluster.drain(pool_id, node, key, forced)


def test_the_drains_started_before_a_drainer_raised_keep_their_release_claimed(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    trace = write_trace({"train": [BUSY * 8.0] * 80}, start=(START - timedelta(hours=2)).isoformat())
    east_released: dict[datetime, int] = {}
    units: dict[datetime, tuple[int, int]] = {}
    failed: list[datetime] = []
    with rig.postgres_ledgers(postgres_database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        west = rig.member(_config("west", "east", []), "west", trace, ledgers[0], START, FLEET)
        east = rig.member(_config("east", "west", []), "east", trace, ledgers[1], START, FLEET)
        drainer = SecondDrainRaises(west.cluster)
        parts = replace(west.agent.parts, drainers={"west": drainer})
        west = replace(west, agent=Agent(west.agent.settings, parts, holder="west"))
        for i in range(6):
            now = START + i * TICK
            for one in (west, east):
                one.cluster.serve(now, {"train": BUSY * 8.0})
                one.clock.set(now)
            try:
                west.agent.run_once(now)
            except RuntimeError:
                failed.append(now)
            east_released[now] = _released(east.agent.run_once(now).plan)
            units[now] = (west.cluster.list_pools()[0].target_units, east.cluster.list_pools()[0].target_units)

    assert failed == [SETTLED] and len(drainer.drains) >= 2, (failed, drainer.drains)
    assert units[SETTLED][0] == FLEET - 1, units  # the first node drained, then the drainer raised
    assert east_released[SETTLED] == 1, east_released  # 3 before: west's claim taken back
    assert sum(east_released.values()) == 1, east_released
    west_end, east_end = units[START + 5 * TICK]
    assert (FLEET - west_end) + (FLEET - east_end) == TEAM_NEEDED, units  # 4 shed, then west back at 8, before
    assert all(u[0] < FLEET for at, u in units.items() if at >= SETTLED), units
