"""A second shared budget with an hourly cap keeps a release from the other agent's marks only where it needs it.

West's pool is in ``team``, shared with east under a monthly cap the two fleets together break by 3 units, and in
``lab``, shared with a pool ``south`` no agent here runs, under an hourly cap; east ticks between west's planning and
west's claim and releases the 3 units ``team`` needs (as in ``tests.test_shared_budget_claims_two_budgets``). A claim
keeps a unit of a release for the others' new marks only where every budget the release is needed for saw them pay
for it, and a budget with an hourly cap always counted as needing it: with room in ``lab``'s hourly cap for west's
whole fleet and 5 units more, nobody marking in it, west's claim kept its whole release, and west and east both
released 3 units at 12:10, 6 where ``team`` needed 3. An hourly cap now counts only where the planner's projection of
the hour (its snapshot) with the released units kept breaks it, or the whole next hour does at the more of the units
each of the budget's pools west runs bills now and after the plan (the planner holds the cap over that hour too): west
releases nothing. Where ``lab``'s cap is broken by west's own fleet, in this hour or only in the next (the agents
starting at 12:30, the hour's spend so far is half an hour's), west still releases what ``lab`` needs.

Run on two connections to one real PostgreSQL ledger."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest

from agent.budget_reserve import Reserved
from models import CapacityPlan, LedgerEntry, PoolState
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_shed_once import CASES, FLEET, SEEDED_USD, START, TICK

pytestmark = POSTGRES

BUSY = 4
TEAM_CAPS, TEAM_NEEDED = CASES["monthly"]
FLEET_HOUR_USD = FLEET * rig.UNIT_HOUR_USD  # west's fleet for an hour
ROOM_CAP = FLEET_HOUR_USD + 5 * rig.UNIT_HOUR_USD  # west's whole fleet for this hour and the next, and 5 units more
BROKEN_CAP = FLEET_HOUR_USD - 3 * rig.UNIT_HOUR_USD + 1.0  # west's fleet alone is 3 units over it for a whole hour
# from 12:30, west's fleet spends 36 USD in the hour (with its idle units kept; 4 of them the seed's) and 64 in the
# next, which breaks this cap only
NEXT_HOUR_CAP = FLEET_HOUR_USD - 2 * rig.UNIT_HOUR_USD + 2.0


def _hours(span: timedelta) -> float:
    return span / timedelta(hours=1)


def _lab(cap_usd: float, name: str = "lab") -> dict[str, Any]:
    return {"name": name, "pools": ["west"], "remote_pools": ["south"], "hourly_cap_usd": cap_usd}


def _config(own: str, other: str, budgets: list[dict[str, Any]]) -> dict[str, Any]:
    config = rig.shared_budget_config(own, other, **TEAM_CAPS)
    config["budgets"] = [*config["budgets"], *budgets]
    config["planner"] = {"headroom_units": FLEET - BUSY}  # the idle units are the planner's: it keeps them
    return config


def _released(plan: CapacityPlan) -> int:
    return sum(r.from_units - r.to_units for r in plan.resizes if not r.is_scale_up)


def _east_ticking_before_west_claims(
    write_trace: TraceWriter,
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
    lab: dict[str, Any],
    start: datetime = START,
) -> tuple[dict[datetime, int], dict[datetime, int]]:
    """The units west and east release at each of 4 ticks from ``start``, east ticking between west's planning and
    its claim, west's pool also in ``lab``."""
    trace = write_trace({"train": [BUSY * 8.0] * 80}, start=(start - timedelta(hours=2)).isoformat())
    west_released: dict[datetime, int] = {}
    east_released: dict[datetime, int] = {}
    with rig.postgres_ledgers(database) as ledgers:
        ledgers[0].record(LedgerEntry("west", start - timedelta(hours=125), start, 1, SEEDED_USD))
        west = rig.member(_config("west", "east", [lab]), "west", trace, ledgers[0], start, FLEET)
        east = rig.member(_config("east", "west", []), "east", trace, ledgers[1], start, FLEET)
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
            now = start + i * TICK
            for one in (west, east):
                one.cluster.serve(now, {"train": BUSY * 8.0})
            west.clock.set(now)
            west_released[now] = _released(west.agent.run_once(now).plan)
    return west_released, east_released


def test_an_hourly_budget_the_release_is_not_needed_for_does_not_keep_it(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    west_released, east_released = _east_ticking_before_west_claims(
        write_trace, postgres_database, monkeypatch, _lab(ROOM_CAP)
    )
    settled = START + 2 * TICK  # the idle units are idle for the 10-minute window
    assert east_released[settled] == TEAM_NEEDED, east_released  # team's shed: west's units not marked yet
    assert west_released[settled] == 0, west_released  # east's marks in team pay for it; lab needs nothing (3 before)
    assert sum(west_released.values()) + sum(east_released.values()) == TEAM_NEEDED, (west_released, east_released)


# what lab's shed needs, by the shed's arithmetic: west's fleet for an hour over the cap, each unit released at the
# settled tick saving its price over what is left of the hour but the tick it still bills
THIS_HOUR_NEEDED = math.ceil((FLEET_HOUR_USD - BROKEN_CAP) / (rig.UNIT_HOUR_USD * _hours(timedelta(minutes=45))))
NEXT_HOUR_NEEDED = math.ceil((FLEET_HOUR_USD - NEXT_HOUR_CAP) / (rig.UNIT_HOUR_USD * _hours(timedelta(minutes=55))))


@pytest.mark.parametrize(
    ("start", "cap_usd", "lab_needed"),
    [(START, BROKEN_CAP, THIS_HOUR_NEEDED), (START + timedelta(minutes=30), NEXT_HOUR_CAP, NEXT_HOUR_NEEDED)],
    ids=["this-hour", "next-hour"],
)
@pytest.mark.parametrize("lab", ["lab", "zeta"])
def test_an_hourly_budget_the_release_is_needed_for_keeps_it(
    write_trace: TraceWriter,
    postgres_database: Database,
    monkeypatch: pytest.MonkeyPatch,
    start: datetime,
    cap_usd: float,
    lab_needed: int,
    lab: str,
) -> None:
    """West's shed is planned for both budgets at once (the more of their needs), its record naming the first by
    name: ``zeta`` after ``team``, so the claim asks whether ``zeta`` needs the release. It keeps only what the marks
    in both pay for, and nobody marks in ``lab``. From 12:30 only the next hour breaks the hourly cap."""
    west_released, east_released = _east_ticking_before_west_claims(
        write_trace, postgres_database, monkeypatch, _lab(cap_usd, lab), start
    )
    settled = start + 2 * TICK
    assert 0 < lab_needed <= FLEET - BUSY
    assert east_released[settled] == TEAM_NEEDED, east_released  # team's shed: west's units not marked yet
    assert west_released[settled] == max(TEAM_NEEDED, lab_needed), west_released  # 0 if lab counted as not needing it
    assert sum(west_released.values()) == max(TEAM_NEEDED, lab_needed), west_released
