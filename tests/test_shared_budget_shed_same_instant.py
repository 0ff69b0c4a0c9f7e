"""Agents sharing a broken cap that tick at the same instant shed its excess once between them.

West and east each hold 8 units (4 busy, 4 idle) and share a budget whose cap the two fleets together break by 3
units (``tests.test_shared_budget_shed_once``; 4 under the hourly cap). Ticking in turn, the second to tick reads the
first's marks and sheds nothing. Ticking at the same instant, each read the ledger before either had written its
marks: both planned the whole shed, and both released it: 6 units where 3 were needed. The decision is now taken
again under the ledger's writer lock, between planning and acting: the second agent to take the lock reads the marks
the first wrote in it and releases only what they leave, and writes its own marks in the same transaction.

Each agent records its tick's spend at the start of the tick and replaces its standing reservation at the end. Read
in between, the other's tick was counted twice: recorded, and by the old reservation counted from its start. Under
the hourly cap east shed 4 units at 12:10, then west 1 more at 12:15 (its reading 5.33 USD high: 8 units for a
tick); a hard stop evicted 4 units in each agent where 4 were needed. A reservation is now counted from where its
pools' recorded spend ends (``agent.ledger.reservation_spans``).

Run on two connections to one real PostgreSQL ledger, each agent in a thread of its own: both record their spend
before either reads the ledger, and both read and plan before either reserves and acts (two barriers), so each read
finds the other's tick recorded and neither's marks nor reservations replaced."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pytest

from agent.budget_reserve import Reserved
from agent.loop import TickReport
from agent.planning.budget import BudgetSpend
from models import CapacityPlan, LedgerEntry, PoolState
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_shed_once import (
    CASES,
    FLEET,
    FLEETS_HOUR_USD,
    SEEDED_USD,
    SETTLED,
    START,
    TICK,
    Released,
    _drained,
    _hours,
)

pytestmark = POSTGRES


def _config(own: str, other: str, busy: int, **caps: Any) -> dict[str, Any]:
    config = rig.shared_budget_config(own, other, **caps)
    config["planner"] = {"headroom_units": FLEET - busy}  # the idle units are the planner's: it keeps them
    return config


def _interleave(members: Sequence[rig.Member], monkeypatch: pytest.MonkeyPatch) -> None:
    """No agent reads the ledger before every agent has recorded its tick's spend, and none reserves (and acts)
    before every agent has read the ledger and planned its tick on it."""
    recorded = threading.Barrier(len(members), timeout=30)  # one per tick, again and again; a tick failing before
    planned = threading.Barrier(len(members), timeout=30)  # it fails the other's wait too
    for one in members:
        watch = one.agent.budget_watch

        def read(now: datetime, unread: Collection[str] = (),
                 spend: Callable[..., list[BudgetSpend]] = watch.spend) -> list[BudgetSpend]:  # fmt: skip
            recorded.wait()  # both recorded their ticks: neither has replaced its reservation yet
            return spend(now, unread)

        def paused(now: datetime, plan: CapacityPlan, states: Mapping[str, PoolState] | None = None,
                   reserve: Callable[..., Reserved] = watch.reserve) -> Reserved:  # fmt: skip
            planned.wait()  # both read the ledger and planned on it: neither has written its marks yet
            return reserve(now, plan, states)

        monkeypatch.setattr(watch, "spend", read)
        monkeypatch.setattr(watch, "reserve", paused)


def _tick_together(members: Sequence[rig.Member], now: datetime) -> dict[str, TickReport]:
    """Every agent's tick at ``now``, each in a thread of its own (``_interleave``)."""

    def run(one: rig.Member) -> TickReport:
        one.clock.set(now)
        return one.agent.run_once(now)

    with ThreadPoolExecutor(len(members)) as pool:
        ticks = {one.name: pool.submit(run, one) for one in members}
        return {name: tick.result() for name, tick in ticks.items()}


def _run_together(
    write_trace: TraceWriter,
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
    busy: int,
    ticks: int,
    caps: dict[str, Any],
    drained: bool = False,
) -> tuple[Released, float]:
    """Both agents, ``busy`` units of each busy, tick ``ticks`` times from START at the same instants, each recording
    before either reads and planning before either reserves (``_interleave``): the units each released at each
    tick, and the budget's spend recorded."""
    trace = write_trace({"train": [busy * 8.0] * 80}, start=(START - timedelta(hours=2)).isoformat())
    released: Released = {}
    with rig.postgres_ledgers(database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        members = [
            rig.member(_config(own, other, busy, **caps), own, trace, ledger, START, FLEET)
            for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
        ]
        if drained:  # the releases are carried out as drains, keyed by their node
            members = [_drained(one) for one in members]
        _interleave(members, monkeypatch)
        for i in range(ticks):
            now = START + i * TICK
            for one in members:
                one.cluster.serve(now, {"train": busy * 8.0})
            reports = _tick_together(members, now)
            released[now] = {
                name: sum(r.from_units - r.to_units for r in report.plan.resizes if not r.is_scale_up)
                for name, report in reports.items()
            }
        spent = ledgers[0].spent(["west", "east"], START - timedelta(days=30), START + ticks * TICK)
    return released, spent


@pytest.mark.parametrize(
    ("case", "drained"),
    [("monthly", False), ("monthly", True), ("commit-horizon", False), ("hourly", False), ("hourly", True)],
)
def test_agents_ticking_at_the_same_instant_shed_a_broken_cap_once(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch, case: str, drained: bool
) -> None:
    caps, needed = CASES[case]
    assert 0 < needed <= FLEET - 4  # the idle units of either agent alone could cover it

    released, _ = _run_together(write_trace, postgres_database, monkeypatch, 4, 6, caps, drained)

    assert all(sum(r.values()) == 0 for now, r in released.items() if now < SETTLED), released
    total = sum(sum(r.values()) for r in released.values())
    assert needed <= total <= needed + 1, (needed, released)
    assert sum(released[SETTLED].values()) == total, released  # one agent's release at the same tick: the shed


def test_a_hard_stop_at_the_same_instant_evicts_what_it_needs_once(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    unit_tick = rig.UNIT_HOUR_USD * _hours(TICK)
    three_ticks_of_fleets = FLEETS_HOUR_USD * _hours(3 * TICK)  # to 12:05, and the two ticks a stop reads ahead
    cap = SEEDED_USD + three_ticks_of_fleets - 4 * unit_tick + 0.5
    needed = math.ceil((SEEDED_USD + three_ticks_of_fleets - cap) / unit_tick)

    released, spent = _run_together(
        write_trace, postgres_database, monkeypatch, FLEET, 4, {"monthly_cap_usd": cap, "commit_horizon": "24h"}
    )

    assert released[START] == {"west": 0, "east": 0}, released  # neither has reserved yet: each sees its own fleet
    assert sum(released[START + TICK].values()) == needed, released  # one agent's stop: the other counts its units
    assert spent <= cap + 1e-6
