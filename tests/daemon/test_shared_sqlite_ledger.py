"""Two replicas of one daemon on one SQLite ledger file (``ledger.shared_file``), with whole daemons (the real
agent loop, election on the fake Kubernetes API, a shared simulated cluster, a simulated clock):

* only the leader writes the file: a standby's writes and reservations are refused, and its ticks leave the file
  as it was (size, modification time, rows), while it still reads the budget's spend from it;
* the replica that takes over when the leader dies keeps month-to-date spend to the cent and resumes accrual
  where the file ends (no hole, no overlap);
* a leader that lost the lease but still runs lets go of the file at its next tick; the new leader holds the pools
  (its ticks fail, alerted) until then, and recovers on its own.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from actuators import SimulatedCluster
from agent.ledger.accrual import GRID
from agent.ledger.reservations import ReservationRequest
from agent.ledger.shared_file import LeaderWrittenLedger
from config.schema import BudgetSettings, Settings
from models import LedgerEntry, LedgerUnavailable
from models.clock import SimulatedClock
from tests.daemon.conftest import RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica
from tests.fakes.kube_api import FakeKubeApi

POOL = "a100-on-demand"
TICK = timedelta(seconds=60)
MONTH = datetime(2026, 3, 1, tzinfo=UTC)  # the conftest clock starts on 2026-03-02


@dataclass
class Member:
    replica: ScenarioReplica
    ledger: LeaderWrittenLedger
    link: CuttableLink

    def leads(self, now: datetime) -> bool:
        return self.replica.assembled.elector.is_leader(now)

    def errors(self, error: str) -> float:
        registry = self.replica.assembled.metrics.registry
        return registry.get_sample_value("leadtime_errors_total", {"error": error}) or 0.0

    def ticks(self, role: str, outcome: str) -> float:
        registry = self.replica.assembled.metrics.registry
        return registry.get_sample_value("leadtime_ticks_total", {"role": role, "outcome": outcome}) or 0.0


@pytest.fixture
def settings(kube_api: FakeKubeApi) -> Settings:
    base = helios_settings(kube_api.url)
    budget = BudgetSettings(name="research", pools=(POOL,), monthly_cap_usd=1_000_000.0)
    ledger = base.ledger.model_copy(update={"shared_file": True})
    return base.model_copy(update={"budgets": (budget,), "ledger": ledger})


@pytest.fixture
def member(
    tmp_path: Path,
    settings: Settings,
    clock: SimulatedClock,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
) -> Callable[[str, SimulatedCluster], Member]:
    def make(name: str, cluster: SimulatedCluster) -> Member:
        link = link_to()
        ledger = LeaderWrittenLedger(tmp_path / "ledger.sqlite")  # one per replica, as each pod opens its own
        replica = scenario_replica(name, settings, clock, cluster, "enforce", api_client_for(link.url), ledger=ledger)
        return Member(replica, ledger, link)

    return make


def play(clock: SimulatedClock, duration: timedelta, electing: list[Member], ticking: list[Member]) -> None:
    """An election every retry period; a tick every minute (and at once for a new leader) for ``ticking``."""
    for _ in range(int(duration / RETRY)):
        clock.advance(RETRY)
        on_the_minute = clock.now().second == 0
        for member in electing:
            step = member.replica.assembled.daemon.elect()
            if member in ticking and (on_the_minute or step.became_leader):
                member.replica.assembled.daemon.tick()


def footprint(path: Path) -> tuple[tuple[int, int] | None, ...]:
    """Size and modification time of the ledger file and its write-ahead log."""
    stats: list[tuple[int, int] | None] = []
    for name in (path.name, path.name + "-wal"):
        try:
            st = (path.parent / name).stat()
        except FileNotFoundError:
            stats.append(None)
            continue
        stats.append((st.st_size, st.st_mtime_ns))
    return tuple(stats)


def rows(path: Path) -> int:
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM entries").fetchone()[0])


def assert_contiguous(entries: list[LedgerEntry]) -> None:
    """Each entry starts where the one before it ended: nothing uncharged, nothing charged twice."""
    real = [e for e in entries if e.end > e.start]
    assert real
    for before, after in itertools.pairwise(real):
        assert after.start == before.end, (before, after)


@pytest.fixture
def pair(
    settings: Settings, clock: SimulatedClock, member: Callable[[str, SimulatedCluster], Member]
) -> tuple[Member, Member]:
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    a, b = member("leadtime-a", cluster), member("leadtime-b", cluster)
    for m in (a, b):
        m.replica.assembled.daemon.refit()
    play(clock, timedelta(minutes=6), [a, b], [a, b])
    return (a, b) if a.leads(clock.now()) else (b, a)


@pytest.mark.slow
def test_only_the_leader_writes_and_the_next_one_keeps_month_to_date_spend(
    tmp_path: Path, clock: SimulatedClock, pair: tuple[Member, Member]
) -> None:
    leader, standby = pair
    path = tmp_path / "ledger.sqlite"
    now = clock.now()
    assert standby.ticks("standby", "ok") >= 5
    assert leader.ticks("leader", "ok") >= 5
    # The leader exports its budget as its last tick planned with it (the alert rules and the dashboard read it).
    registry = leader.replica.assembled.metrics.registry
    spent = registry.get_sample_value("leadtime_budget_spent_usd", {"budget": "research"})
    assert spent is not None and 0 < spent <= leader.ledger.spent([POOL], MONTH, now)
    remaining = registry.get_sample_value("leadtime_budget_remaining_usd", {"budget": "research"})
    assert remaining == pytest.approx(1_000_000.0 - spent)
    projected = registry.get_sample_value("leadtime_budget_projected_usd", {"budget": "research"})
    assert projected is not None and projected > spent

    # A standby's writes and reservations are refused, and its ticks leave the file as it was.
    entry = LedgerEntry(POOL, now, now + TICK, 1, 29.36)
    with pytest.raises(LedgerUnavailable, match="standby"):
        standby.ledger.record(entry)
    request = ReservationRequest("research", (POOL,), MONTH, MONTH + timedelta(days=31), 1e6, 1.0, "b", TICK)
    with pytest.raises(LedgerUnavailable, match="standby"):
        standby.ledger.reserve(request, now)
    before, count = footprint(path), rows(path)
    standby_ok, unread = standby.ticks("standby", "ok"), standby.errors("LedgerUnavailable")
    play(clock, timedelta(minutes=3), [leader, standby], [standby])
    assert standby.ticks("standby", "ok") == standby_ok + 3
    assert standby.errors("LedgerUnavailable") == unread  # it read the budget's spend from the file each tick
    assert (footprint(path), rows(path)) == (before, count)
    # It reads what the leader recorded.
    assert standby.ledger.spent([POOL], MONTH, clock.now()) == leader.ledger.spent([POOL], MONTH, clock.now()) > 0

    # The leader dies (its process ends: the kernel releases its lock on the file); the standby takes over.
    play(clock, TICK, [leader, standby], [leader, standby])
    died = clock.now()
    month_to_date = leader.ledger.spent([POOL], MONTH, died)
    cell = died - (died - MONTH) % GRID  # a 15-minute cell's readings are one entry, which the next leader extends
    before_cell = leader.ledger.spent([POOL], MONTH, cell)
    leader.ledger.close()
    play(clock, timedelta(minutes=3), [standby], [standby])
    assert standby.leads(clock.now())
    assert standby.ticks("leader", "ok") >= 3
    assert standby.ticks("leader", "failed") == 0
    assert round(standby.ledger.spent([POOL], MONTH, cell), 2) == round(before_cell, 2)
    assert standby.ledger.spent([POOL], MONTH, clock.now()) > month_to_date
    assert_contiguous(standby.ledger.entries(POOL))
    newest = standby.ledger.last_entry(POOL)
    assert newest is not None and newest.end > died  # it charges on from where the leader left off


@pytest.mark.slow
def test_a_leader_cut_off_from_the_api_lets_go_of_the_file_and_the_new_leader_recovers(
    clock: SimulatedClock, pair: tuple[Member, Member]
) -> None:
    old, new = pair
    old.link.cut()  # it stops acting at the renew deadline, but the process (and its writer lock) lives on
    for _ in range(int(timedelta(seconds=40) / RETRY)):  # the other takes the lease; the old one does not tick yet
        clock.advance(RETRY)
        for m in (old, new):
            step = m.replica.assembled.daemon.elect()
            if m is new and step.became_leader:
                m.replica.assembled.daemon.tick()
    assert new.leads(clock.now()) and not old.leads(clock.now())
    assert new.ticks("leader", "failed") == 1  # the file is still locked by the old leader: the pools are held
    failed = [e for e in new.replica.notifier.delivered if "ledger" in str(e.details.get("detail", ""))]
    assert failed, "the held tick was not alerted"
    held_at = clock.now()
    spent_when_held = old.ledger.spent([POOL], MONTH, held_at)
    play(clock, timedelta(minutes=3), [old, new], [old, new])  # the old one's standby tick lets go
    assert new.ticks("leader", "ok") >= 2
    assert_contiguous(new.ledger.entries(POOL))
    assert new.ledger.spent([POOL], MONTH, clock.now()) > spent_when_held
    assert os.path.exists(new.ledger.path)
