"""A release of a pool in two shared budgets is not cut by marks of the other agents in one of them alone.

West's pool is in two budgets: ``team``, shared with east (whose pool is in ``team`` only), under a monthly cap the
two fleets together break by 3 units, and ``lab``, shared with a pool ``south`` no agent here runs, under a monthly
cap west's own fleet breaks by 3 units. West plans 3 units released for both, its record naming one budget; east
ticks between west's planning and west's claim and releases the 3 units ``team`` needs. West's claim read east's new
marks in ``team`` and cut its whole release, though ``lab`` (which east's units are not in) needed it: ``lab`` stayed
broken one more tick. West's claim now keeps a unit only where the new marks of every budget over its pool pay for
it.

A budget whose cap the release is not needed for does not count: with ``lab`` room enough for west's whole fleet,
nobody marking in it, west's claim required new marks in ``lab`` too to keep a unit, and east's 3 units marked in
``team`` never cut west's release: both released 3 at 12:10, 6 units where ``team`` needed 3. A budget counts only
where the planner's projection of it, with the units released kept, breaks its cap: west now releases nothing.

Run on two connections to one real PostgreSQL ledger."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest

from agent.budget_reserve import Reserved
from models import CapacityPlan, LedgerEntry, PoolState
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_shed_once import CASES, FLEET, SEEDED_USD, SETTLED, START, TICK, UNIT_TO_MONTH_END

pytestmark = POSTGRES

BUSY = 4
TEAM_CAPS, TEAM_NEEDED = CASES["monthly"]
LAB_CAP = SEEDED_USD + (FLEET - 3) * UNIT_TO_MONTH_END + 100.0  # west's fleet alone: 3 units over


LAB_ROOM_CAP = SEEDED_USD + (FLEET + 5) * UNIT_TO_MONTH_END  # room for west's whole fleet and 5 units more


def _lab(name: str, cap_usd: float = LAB_CAP) -> dict[str, Any]:
    return {"name": name, "pools": ["west"], "remote_pools": ["south"], "monthly_cap_usd": cap_usd}


def _config(own: str, other: str, budgets: list[dict[str, Any]]) -> dict[str, Any]:
    config = rig.shared_budget_config(own, other, **TEAM_CAPS)
    config["budgets"] = [*config["budgets"], *budgets]
    config["planner"] = {"headroom_units": FLEET - BUSY}  # the idle units are the planner's: it keeps them
    return config


def _released(plan: CapacityPlan) -> int:
    return sum(r.from_units - r.to_units for r in plan.resizes if not r.is_scale_up)


def _east_ticking_before_west_claims(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch, lab: dict[str, Any]
) -> tuple[dict[datetime, int], dict[datetime, int]]:
    """The units west and east release at each tick from 12:00 to 12:15, east ticking between west's planning and
    its claim, west's pool also in ``lab``."""
    trace = write_trace({"train": [BUSY * 8.0] * 80}, start=(START - timedelta(hours=2)).isoformat())
    west_released: dict[datetime, int] = {}
    east_released: dict[datetime, int] = {}
    with rig.postgres_ledgers(postgres_database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        west = rig.member(_config("west", "east", [lab]), "west", trace, ledgers[0], START, FLEET)
        east = rig.member(_config("east", "west", []), "east", trace, ledgers[1], START, FLEET)
        watch = west.agent.budget_watch

        def east_ticks_before_west_claims(
            now: datetime, plan: CapacityPlan, states: Mapping[str, PoolState] | None = None,
            reserve: Callable[..., Reserved] = watch.reserve,
        ) -> Reserved:  # fmt: skip
            east.clock.set(now)
            east_released[now] = _released(east.agent.run_once(now).plan)
            return reserve(now, plan, states)  # west's claim: east's marks read again

        monkeypatch.setattr(watch, "reserve", east_ticks_before_west_claims)
        for i in range(4):
            now = START + i * TICK
            for one in (west, east):
                one.cluster.serve(now, {"train": BUSY * 8.0})
            west.clock.set(now)
            west_released[now] = _released(west.agent.run_once(now).plan)
    return west_released, east_released


@pytest.mark.parametrize("lab", ["lab", "zeta"])
def test_a_release_two_budgets_need_is_kept_when_the_other_agent_sheds_for_one(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch, lab: str
) -> None:
    west_released, east_released = _east_ticking_before_west_claims(
        write_trace, postgres_database, monkeypatch, _lab(lab)
    )
    assert east_released[SETTLED] == TEAM_NEEDED, east_released  # team's shed: west's units not marked yet
    assert west_released[SETTLED] == 3, west_released  # lab's shed, at the tick it is needed
    assert sum(west_released.values()) == 3, west_released


def test_a_budget_the_release_is_not_needed_for_does_not_keep_it(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    west_released, east_released = _east_ticking_before_west_claims(
        write_trace, postgres_database, monkeypatch, _lab("lab", LAB_ROOM_CAP)
    )
    assert east_released[SETTLED] == TEAM_NEEDED, east_released  # team's shed: west's units not marked yet
    assert west_released[SETTLED] == 0, west_released  # east's marks in team pay for it; lab needs nothing (3 before)
    assert sum(west_released.values()) + sum(east_released.values()) == TEAM_NEEDED, (west_released, east_released)
