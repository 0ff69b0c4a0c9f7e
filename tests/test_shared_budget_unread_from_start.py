"""A pool no agent has read yet is not reserved at its max_units in a budget shared with other agents.

A new install whose cloud role is still propagating cannot read its pool from its first tick: the ledger has no
record of it and the agent never read it, so nothing says what it holds (here: nothing). Reserved at its max_units to
the month's end, it shut the agents already running out of the shared cap (75,904 USD reserved against 38,016, east
held at 8 units and refused every tick). It is now reserved at nothing until it is read or recorded, and the
pool-unreadable alert tells the operator. West's pool holds 0 units and every read is refused; east, beside it,
grows from 8 to the 12 units its demand asks for, which the cap has room for."""

from __future__ import annotations

from datetime import timedelta

from agent.ledger import InMemoryLedger
from models import AlertKind, PermanentActuatorError
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.test_shared_budget_unread_pool import MONTH_END, START

CAP = 12 * rig.UNIT_HOUR_USD * ((MONTH_END - START) / timedelta(hours=1))  # room for 12 units to the month's end


def test_a_pool_unread_since_the_first_tick_reserves_nothing_and_leaves_the_room_to_the_others(
    write_trace: TraceWriter,
) -> None:
    t0 = (START - timedelta(hours=2)).isoformat()
    traces = {
        "west": write_trace({"train": [0.0] * 60}, start=t0, step="5min", name="west.csv"),
        "east": write_trace({"train": [64.0] * 26 + [96.0] * 34}, start=t0, step="5min", name="east.csv"),
    }
    ledger = InMemoryLedger()
    agents = [
        rig.member(rig.shared_budget_config(own, other, monthly_cap_usd=CAP), own, traces[own], ledger, START, units)
        for own, other, units in (("east", "west", 8), ("west", "east", 0))
    ]
    denied = PermanentActuatorError("west", "HTTP 403: permission container.nodePools.get denied")
    agents[1].cluster.fail_reads("west", denied)
    east_refused: list[str] = []
    unreadable: list[str] = []
    now = START
    while now <= START + timedelta(minutes=40):
        reports = rig.tick(agents, now)
        east_refused += rig.refused(reports["east"])
        kinds = {a.kind: a.subject for a in reports["west"].alerts}
        if AlertKind.POOL_UNREADABLE in kinds:
            unreadable.append(kinds[AlertKind.POOL_UNREADABLE])
        now += timedelta(minutes=5)
    east = ledger.last_entry("east")
    assert east is not None and east.units == 12
    assert east_refused == []
    assert unreadable  # west's operator is told its pool is not read
