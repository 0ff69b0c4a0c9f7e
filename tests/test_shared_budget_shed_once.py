"""Agents sharing a broken cap shed, between them, what its excess needs: not each the whole of it.

West and east each hold 8 units at 8 USD a unit-hour and share a budget whose cap the two fleets together break (a cap
lowered under them). Each agent's projection counts the other's units from its reservation, so each saw the whole
excess and shed units for all of it from its own pool: with 4 units of each idle (the planner's headroom) and a
monthly cap 3 units short, west and east each released 3 idle units, 6 where 3 were needed, and west bought 3 back
ten minutes later. An agent now marks in the ledger the units it is releasing (for two of its ticks) and the others'
sheds count them as shed already: west releases 3 and east none. Under a commit horizon's hard stop, which counted no
other agent's units at all, the stop now counts what the others keep over its two ticks, and only one agent evicts
busy units. A mark its agent stops renewing lapses: the units count again and the agent left sheds for them.

Run on two connections to one real PostgreSQL ledger (each agent its own), the agents ticking in turn every 5 minutes
on simulated pools; the units shed are checked against those the excess needs by the shed's own arithmetic."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.loop import Agent
from models import LedgerEntry
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES

START = datetime(2024, 1, 15, 12, tzinfo=UTC)
MONTH_END = datetime(2024, 2, 1, tzinfo=UTC)
FLEET = 8
TICK = timedelta(minutes=5)
SETTLED = START + timedelta(minutes=10)  # the idle units are idle for the 10-minute window from here
SEEDED_USD = 1000.0  # spent earlier in the month, recorded on west's pool
FLEETS_HOUR_USD = 2 * FLEET * rig.UNIT_HOUR_USD

Released = dict[datetime, dict[str, int]]  # tick -> agent -> units its plan released


def _hours(span: timedelta) -> float:
    return span / timedelta(hours=1)


def _config(own: str, other: str, busy: int, **caps: Any) -> dict[str, Any]:
    config = rig.shared_budget_config(own, other, **caps)
    config["planner"] = {"headroom_units": FLEET - busy}  # the idle units are the planner's: it keeps them
    return config


def _run(
    write_trace: TraceWriter,
    database: Database,
    busy: int,
    ticks: int,
    caps: dict[str, Any],
    order: Sequence[tuple[str, str]] = rig.PAIRS,
    east_dies_after: datetime | None = None,
    drained: bool = False,
) -> tuple[Released, float]:
    """Both agents, ``busy`` units of each busy, tick ``ticks`` times from START in ``order`` (east from
    ``east_dies_after`` on no more; ``drained``: each pool shrinks by draining its idle nodes, as every GKE node pool
    does): the units each released at each tick, and the budget's spend recorded."""
    trace = write_trace({"train": [busy * 8.0] * 80}, start=(START - timedelta(hours=2)).isoformat())
    released: Released = {}
    with rig.postgres_ledgers(database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        agents = [
            rig.member(_config(own, other, busy, **caps), own, trace, ledger, START, FLEET)
            for ledger, (own, other) in zip(ledgers, order, strict=True)
        ]
        if drained:  # the releases are carried out as drains, keyed by their node (``models.plan.drain_key``)
            agents = [_drained(one) for one in agents]
        for i in range(ticks):
            now = START + i * TICK
            alive = [a for a in agents if a.name == "west" or east_dies_after is None or now <= east_dies_after]
            for one in alive:
                one.cluster.serve(now, {"train": busy * 8.0})
            reports = rig.tick(alive, now)
            released[now] = {
                name: sum(r.from_units - r.to_units for r in report.plan.resizes if not r.is_scale_up)
                for name, report in reports.items()
            }
        spent = ledgers[0].spent(["west", "east"], START - timedelta(days=30), START + ticks * TICK)
    return released, spent


def _drained(one: rig.Member) -> rig.Member:
    """``one`` with its simulated cluster as its pool's node drainer."""
    parts = replace(one.agent.parts, drainers={one.name: one.cluster})
    return replace(one, agent=Agent(one.agent.settings, parts, holder=one.name))


def _needed(cap: float, end: datetime, saved_for: timedelta) -> int:
    """The units a shed must release, by the shed's own arithmetic: both fleets' spend since START (and the
    seed), and their units to ``end``, over the cap; each unit released saves its price over ``saved_for`` (what is
    left of the span but the tick it still bills)."""
    projected = SEEDED_USD + FLEETS_HOUR_USD * _hours(end - START)
    return math.ceil((projected - cap) / (rig.UNIT_HOUR_USD * _hours(saved_for)))


UNIT_TO_MONTH_END = rig.UNIT_HOUR_USD * _hours(MONTH_END - START)
MONTHLY_CAP = SEEDED_USD + (2 * FLEET - 3) * UNIT_TO_MONTH_END + 100.0
HOURLY_CAP = FLEETS_HOUR_USD - 3 * rig.UNIT_HOUR_USD + 1.0  # the seed is last week's: not in this hour
HORIZON_CAP = SEEDED_USD + (2 * FLEET - 3) * rig.UNIT_HOUR_USD * 24 + 100.0
HOUR_END = START + timedelta(hours=1)
# each cap, and the units a shed at SETTLED must release for it (the hour's spend leaves the seed out)
CASES: dict[str, tuple[dict[str, Any], int]] = {
    "monthly": ({"monthly_cap_usd": MONTHLY_CAP}, _needed(MONTHLY_CAP, MONTH_END, MONTH_END - SETTLED - TICK)),
    "hourly": (
        {"hourly_cap_usd": HOURLY_CAP},
        _needed(HOURLY_CAP + SEEDED_USD, HOUR_END, HOUR_END - SETTLED - TICK),
    ),
    "commit-horizon": (
        {"monthly_cap_usd": HORIZON_CAP, "commit_horizon": "24h"},
        _needed(HORIZON_CAP, SETTLED + timedelta(hours=24), timedelta(hours=24) - TICK),
    ),
}


@pytest.mark.parametrize("drained", [False, True], ids=["resized", "drained"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_broken_cap_is_shed_once_between_the_agents(
    write_trace: TraceWriter, postgres_database: Database, case: str, drained: bool
) -> None:
    """A pool with a node drainer releases by draining nodes: those drains mark the units as a size change does
    (they were not marked, and both agents shed: 6 units where 3 were needed under the monthly cap)."""
    caps, needed = CASES[case]
    assert 0 < needed <= FLEET - 4  # the idle units of either agent alone could cover it

    released, _ = _run(write_trace, postgres_database, busy=4, ticks=7, caps=caps, drained=drained)

    assert all(sum(r.values()) == 0 for now, r in released.items() if now < SETTLED), released
    total = sum(sum(r.values()) for r in released.values())
    assert needed <= total <= needed + 1, (needed, released)
    assert released[SETTLED]["west"] == total  # west, ticking first, took it all; east saw it taken


def test_a_hard_stop_evicts_busy_units_in_one_agent_only(write_trace: TraceWriter, postgres_database: Database) -> None:
    """Every unit busy, a commit horizon, and money left for the two fleets' next two ticks but 4 units' worth: at
    12:00 west (no reservation of east's yet) stops nothing; east, counting west's units, evicts what the stop needs
    (each unit it releases bills one tick more), west's then kept. The spend never passes the cap."""
    two_ticks_of_fleets = FLEETS_HOUR_USD * _hours(2 * TICK)
    cap = SEEDED_USD + two_ticks_of_fleets - 4 * rig.UNIT_HOUR_USD * _hours(TICK) + 0.5
    needed = math.ceil((SEEDED_USD + two_ticks_of_fleets - cap) / (rig.UNIT_HOUR_USD * _hours(TICK)))

    released, spent = _run(
        write_trace, postgres_database, busy=FLEET, ticks=4, caps={"monthly_cap_usd": cap, "commit_horizon": "24h"}
    )

    assert released[START] == {"west": 0, "east": needed}, released
    assert spent <= cap + 1e-6


def test_an_agent_whose_peer_stopped_renewing_sheds_for_it(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    """East ticks first, releases what the monthly cap needs at 12:10 and is never heard of again: its mark keeps west
    from shedding the same excess for two of east's ticks, then lapses, and west counts east's reservation (still 8
    units, not renewed) at its word and sheds the excess alone."""
    needed = CASES["monthly"][1]

    released, _ = _run(
        write_trace,
        postgres_database,
        busy=4,
        ticks=7,
        caps={"monthly_cap_usd": MONTHLY_CAP},
        order=tuple(reversed(rig.PAIRS)),
        east_dies_after=SETTLED,
    )

    assert released[SETTLED] == {"east": needed, "west": 0}, released
    assert released[SETTLED + TICK] == {"west": 0}, released  # east's mark still counts
    lapsed = SETTLED + 2 * TICK
    assert needed <= released[lapsed]["west"] <= needed + 1, released
