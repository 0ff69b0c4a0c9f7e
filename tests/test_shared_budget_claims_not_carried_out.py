"""A release claimed in a shared budget but never carried out does not keep the other agents from shedding.

West and east each hold 8 units (4 busy, 4 idle) and share a budget whose monthly cap the two fleets together break
by 3 units (``tests.test_shared_budget_shed_once``). A tick claims the units its releases take off the bill before
the executor acts (``agent.budget_shed_claims``), and the others count a claim as shed already. Before a claim was
taken only for the releases the executor sends, and taken back by a tick that fails, a release never carried out
read as shed: west's ticks failing from its first release at 12:10 renewed its claim at every tick and east released
0 units at every tick from 12:00 to 12:35, the cap left broken; west in dry-run (its releases only recorded) claimed 3
units at 12:10, 12:15 and 12:20, and east, ticking between west's claim and its commit, released 0 each time. A claim
not taken back (its process killed before the commit) kept east from shedding for two ticks; it now lives one.

A release carried out keeps its claim when the tick fails after the executor acted (the ledger unavailable while
writing its spend or its commit): the take-back took every claim of the tick, so with west's tick failing so at
12:10, its 8 -> 5 sent, east counted west's units as staying and released 3 more at 12:10, and west bought 3 back
(5 -> 8) at 12:20: 3 units shed twice and bought again. Only the claims of releases not carried out are taken back.

Run on two connections to one real PostgreSQL ledger, west ticking first at each instant."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from actuators import DryRunActuator, SimulatedCluster
from agent.budget_reserve import Reserved
from agent.loop import Agent, TickReport
from models import ActionResult, CapacityPlan, LedgerEntry, PoolState
from models.errors import LedgerUnavailable, TransientActuatorError
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_shed_once import CASES, FLEET, SEEDED_USD, SETTLED, START, TICK

pytestmark = POSTGRES

BUSY = 4
CAPS, NEEDED = CASES["monthly"]
LEAD_TIME = timedelta(minutes=10)  # west's pool's


class _Killed(BaseException):
    """West's process ending between its claim and its commit (no handler of the agent's runs)."""


class FailingResizes:
    """West's actuator: the pools are read, and every resize raises as a defect in the actuator would (an error the
    executor does not translate), so every tick that releases units fails after its claim."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self._cluster = cluster

    def list_pools(self) -> Sequence[PoolState]:
        return self._cluster.list_pools()

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        raise RuntimeError(f"resize of {pool_id} to {to_units} failed")


class RefusedResizes(FailingResizes):
    """West's actuator: the pools are read, and the cloud refuses every resize for now (a transient error the
    executor records as a failed action, the tick going on)."""

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        raise TransientActuatorError(pool_id, f"resize to {to_units}: 429 too many operations, try again later")


def _config(own: str, other: str) -> dict[str, Any]:
    config = rig.shared_budget_config(own, other, **CAPS)
    config["planner"] = {"headroom_units": FLEET - BUSY}  # the idle units are the planner's: it keeps them
    return config


def _members(write_trace: TraceWriter, ledgers: rig.Ledgers) -> list[rig.Member]:
    trace = write_trace({"train": [BUSY * 8.0] * 80}, start=(START - timedelta(hours=2)).isoformat())
    ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
    return [
        rig.member(_config(own, other), own, trace, ledger, START, FLEET)
        for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
    ]


def _released(report: TickReport) -> int:
    return sum(r.from_units - r.to_units for r in report.plan.resizes if not r.is_scale_up)


def _with_actuator(one: rig.Member, actuator: Any) -> rig.Member:
    parts = replace(one.agent.parts, actuator=actuator)
    return replace(one, agent=Agent(one.agent.settings, parts, holder=one.name))


def test_an_agent_whose_ticks_fail_after_its_claim_lets_the_other_shed(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    failed: list[datetime] = []
    east_released: dict[datetime, int] = {}
    with rig.postgres_ledgers(postgres_database) as ledgers:
        west, east = _members(write_trace, ledgers)
        west = _with_actuator(west, FailingResizes(west.cluster))
        for i in range(6):
            now = START + i * TICK
            for one in (west, east):
                one.cluster.serve(now, {"train": BUSY * 8.0})
                one.clock.set(now)
            try:
                west.agent.run_once(now)
            except RuntimeError:
                failed.append(now)
            east_released[now] = _released(east.agent.run_once(now))

    # a release whose call raised may have been carried out, until west's changes have failed for its lead time
    assert east_released[SETTLED + LEAD_TIME] == NEEDED, east_released  # then west marks nothing: east sheds for both
    assert sum(east_released.values()) == NEEDED, east_released
    assert failed == [SETTLED, SETTLED + TICK, SETTLED + LEAD_TIME], failed  # then east's marks leave west nothing


def test_a_dry_run_agents_releases_are_not_claimed(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    west_released: dict[datetime, int] = {}
    east_released: dict[datetime, int] = {}
    with rig.postgres_ledgers(postgres_database) as ledgers:
        west, east = _members(write_trace, ledgers)
        west = _with_actuator(west, DryRunActuator(west.cluster, west.clock))
        west.agent.budget_watch.adopts_in_flight = False  # as the daemon sets it in dry-run mode
        watch = west.agent.budget_watch

        def east_ticks_before_west_commits(
            now: datetime, plan: CapacityPlan, states: Mapping[str, PoolState] | None = None,
            reserve: Callable[..., Reserved] = watch.reserve,
        ) -> Reserved:  # fmt: skip
            reserved = reserve(now, plan, states)  # west's claim, were it taken, is written here
            east.clock.set(now)
            east_released[now] = _released(east.agent.run_once(now))
            return reserved

        monkeypatch.setattr(watch, "reserve", east_ticks_before_west_commits)
        for i in range(5):
            now = START + i * TICK
            for one in (west, east):
                one.cluster.serve(now, {"train": BUSY * 8.0})
            west.clock.set(now)
            west_released[now] = _released(west.agent.run_once(now))
        east_units = east.cluster.list_pools()[0].target_units
        west_units = west.cluster.list_pools()[0].target_units

    assert west_released[SETTLED] == NEEDED, west_released  # recommended, as an agent that enforces would
    assert west_units == FLEET  # only recorded
    assert east_released[SETTLED] == NEEDED, east_released
    assert sum(east_released.values()) == NEEDED and east_units == FLEET - NEEDED, east_released


def test_a_claim_never_committed_lapses_after_one_tick(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """West claims its shed at 12:10 and its process ends before the commit: east, ticking after it, counts the
    claim at 12:10 (it cannot tell it from a release under way), and no more at 12:15."""
    east_released: dict[datetime, int] = {}
    with rig.postgres_ledgers(postgres_database) as ledgers:
        west, east = _members(write_trace, ledgers)
        watch = west.agent.budget_watch

        def killed(*args: object, acted: Callable[..., None] = watch.acted) -> None:
            if args[0] == SETTLED:
                raise _Killed
            acted(*args)

        monkeypatch.setattr(watch, "acted", killed)
        for i in range(5):
            now = START + i * TICK
            alive = [west, east] if now <= SETTLED else [east]
            for one in alive:
                one.cluster.serve(now, {"train": BUSY * 8.0})
                one.clock.set(now)
            if west in alive:
                with pytest.raises(_Killed) if now == SETTLED else nullcontext():
                    west.agent.run_once(now)
            east_released[now] = _released(east.agent.run_once(now))

    assert east_released[SETTLED] == 0, east_released
    assert east_released[SETTLED + TICK] == NEEDED, east_released  # two ticks later (12:20) before
    assert sum(east_released.values()) == NEEDED, east_released


def test_a_release_carried_out_keeps_its_claim_when_the_tick_fails_after_it(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """West releases 3 units at 12:10 and its tick then fails writing the ledger (once): east, ticking after it,
    still reads the release as shed, and nobody buys anything back."""
    west_resizes: dict[datetime, list[tuple[int, int]]] = {}
    east_released: dict[datetime, int] = {}
    failed: list[datetime] = []
    with rig.postgres_ledgers(postgres_database) as ledgers:
        west, east = _members(write_trace, ledgers)
        watch = west.agent.budget_watch

        def ledger_down_once(*args: object, acted: Callable[..., None] = watch.acted) -> None:
            if args[0] == SETTLED and not failed:
                failed.append(SETTLED)
                raise LedgerUnavailable("the ledger could not be written: could not serialize access")
            acted(*args)

        monkeypatch.setattr(watch, "acted", ledger_down_once)
        for i in range(5):
            now = START + i * TICK
            for one in (west, east):
                one.cluster.serve(now, {"train": BUSY * 8.0})
                one.clock.set(now)
            with pytest.raises(LedgerUnavailable) if now == SETTLED else nullcontext():
                report = west.agent.run_once(now)
                west_resizes[now] = [(r.from_units, r.to_units) for r in report.plan.resizes]
            east_released[now] = _released(east.agent.run_once(now))
        west_units = west.cluster.list_pools()[0].target_units
        east_units = east.cluster.list_pools()[0].target_units

    assert failed == [SETTLED]
    assert east_released[SETTLED] == 0, east_released  # 3 before: west's units counted as staying
    assert sum(east_released.values()) == 0 and east_units == FLEET, east_released
    assert west_units == FLEET - NEEDED, west_units  # sent before the tick failed (bought back to 8 before)
    assert all(to <= was for resizes in west_resizes.values() for was, to in resizes), west_resizes  # 5 -> 8 before


def test_a_release_the_executor_did_not_carry_out_is_taken_back_before_the_commit(
    write_trace: TraceWriter, postgres_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """West's release at 12:10 is refused by the cloud, and east ticks between west's executor and its commit: the
    claim is taken back once the executor acted, so east sheds for both fleets at 12:10 (0 at every tick before: west
    retries its release, claiming it again, at every tick). A refusal is a clear answer, unlike a timeout
    (``maybe_applied``): it sheds at 12:25 when the refusal counted as possibly carried out for the lead time."""
    east_released: dict[datetime, int] = {}
    with rig.postgres_ledgers(postgres_database) as ledgers:
        west, east = _members(write_trace, ledgers)
        west = _with_actuator(west, RefusedResizes(west.cluster))
        watch = west.agent.budget_watch

        def east_ticks_before_west_commits(*args: Any, acted: Callable[..., None] = watch.acted) -> None:
            now = args[0]
            east.clock.set(now)
            east_released[now] = _released(east.agent.run_once(now))
            acted(*args)

        monkeypatch.setattr(watch, "acted", east_ticks_before_west_commits)
        for i in range(5):
            now = START + i * TICK
            for one in (west, east):
                one.cluster.serve(now, {"train": BUSY * 8.0})
            west.clock.set(now)
            west.agent.run_once(now)
        east_units = east.cluster.list_pools()[0].target_units

    assert east_released[SETTLED] == NEEDED, east_released
    assert sum(east_released.values()) == NEEDED and east_units == FLEET - NEEDED, east_released
