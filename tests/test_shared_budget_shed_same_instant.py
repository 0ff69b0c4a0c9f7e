"""Agents sharing a broken cap that tick at the same instant shed its excess once between them.

West and east each hold 8 units (4 busy, 4 idle) and share a budget whose monthly cap the two fleets together break
by 3 units (``tests.test_shared_budget_shed_once``). Ticking in turn, the second to tick reads the first's marks
and sheds nothing. Ticking at the same instant, each read the ledger before either had written its marks: both
planned the whole shed, and both released it: 6 units where 3 were needed. The decision is now taken again under
the ledger's writer lock, between planning and acting: the second agent to take the lock reads the marks the first
wrote in it and releases only what they leave, and writes its own marks in the same transaction.

Run on two connections to one real PostgreSQL ledger, each agent in a thread of its own: both read and plan, and
only once both have planned does either reserve and act (a barrier), so neither read saw the other's marks."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pytest

from agent.budget_reserve import Reserved
from agent.loop import TickReport
from models import CapacityPlan, LedgerEntry, PoolState
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_shed_once import CASES, FLEET, SEEDED_USD, SETTLED, START, TICK, _drained

pytestmark = POSTGRES


def _config(own: str, other: str, busy: int, **caps: Any) -> dict[str, Any]:
    config = rig.shared_budget_config(own, other, **caps)
    config["planner"] = {"headroom_units": FLEET - busy}  # the idle units are the planner's: it keeps them
    return config


def _pause_before_reserving(members: Sequence[rig.Member], monkeypatch: pytest.MonkeyPatch) -> None:
    """No agent reserves (and acts) before every agent has read the ledger and planned its tick on it."""
    planned = threading.Barrier(len(members), timeout=30)  # one per tick, again and again; a tick failing before
    for one in members:  # it fails the other's wait too
        watch = one.agent.budget_watch

        def paused(now: datetime, plan: CapacityPlan, states: Mapping[str, PoolState] | None = None,
                   reserve: Callable[..., Reserved] = watch.reserve) -> Reserved:  # fmt: skip
            planned.wait()  # both read the ledger and planned on it: neither has written its marks yet
            return reserve(now, plan, states)

        monkeypatch.setattr(watch, "reserve", paused)


def _tick_together(members: Sequence[rig.Member], now: datetime) -> dict[str, TickReport]:
    """Every agent's tick at ``now``, each in a thread of its own (``_pause_before_reserving``)."""

    def run(one: rig.Member) -> TickReport:
        one.clock.set(now)
        return one.agent.run_once(now)

    with ThreadPoolExecutor(len(members)) as pool:
        ticks = {one.name: pool.submit(run, one) for one in members}
        return {name: tick.result() for name, tick in ticks.items()}


@pytest.mark.parametrize(("case", "drained"), [("monthly", False), ("monthly", True), ("commit-horizon", False)])
def test_agents_ticking_at_the_same_instant_shed_a_broken_cap_once(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch, case: str, drained: bool
) -> None:
    caps, needed = CASES[case]
    assert 0 < needed <= FLEET - 4  # the idle units of either agent alone could cover it
    busy = 4
    trace = write_trace({"train": [busy * 8.0] * 80}, start=(START - timedelta(hours=2)).isoformat())
    released: dict[datetime, dict[str, int]] = {}
    with rig.postgres_ledgers(postgres_database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        members = [
            rig.member(_config(own, other, busy, **caps), own, trace, ledger, START, FLEET)
            for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
        ]
        if drained:  # the releases are carried out as drains, keyed by their node
            members = [_drained(one) for one in members]
        _pause_before_reserving(members, monkeypatch)
        for i in range(5):
            now = START + i * TICK
            for one in members:
                one.cluster.serve(now, {"train": busy * 8.0})
            reports = _tick_together(members, now)
            released[now] = {
                name: sum(r.from_units - r.to_units for r in report.plan.resizes if not r.is_scale_up)
                for name, report in reports.items()
            }

    assert all(sum(r.values()) == 0 for now, r in released.items() if now < SETTLED), released
    total = sum(sum(r.values()) for r in released.values())
    assert needed <= total <= needed + 1, (needed, released)
    assert sum(released[SETTLED].values()) == total, released  # one agent's release at the same tick: the shed
