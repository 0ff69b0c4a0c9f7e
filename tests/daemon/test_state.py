"""State across restarts and leader changes, with whole daemons (real agent loop, election, the planner memory
in a ConfigMap on the fake Kubernetes API, a shared simulated cluster):

* a back-off set by one leader is honoured by the replica that takes over (and, with separate stores, is not:
  the control that shows the test can fail);
* a pool blocked after a permanent error stays blocked when the same replica restarts;
* a 500 or a 409 on save neither fails the tick nor loses the memory: it is saved on a later tick;
* a standby charges its own ledger while the other leads, so after takeover its ledger has no hole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

import pytest
from kubernetes import client as k8s

from actuators import Actuator, SimulatedCluster
from agent.ledger.accrual import GRID
from agent.state import InMemoryStateStore, StateStore
from agent.state.codec import decode
from agent.state.configmap import KEY
from models import ActionResult, PermanentActuatorError, PoolState
from models.clock import SimulatedClock
from tests.daemon.conftest import RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica
from tests.fakes.kube_api import FakeKubeApi

POOL = "a100-on-demand"
TICK = timedelta(seconds=60)


@dataclass
class Attempts:
    """Wraps what a replica's loop resizes through; records who tried a resize, and when."""

    inner: Actuator
    name: str
    clock: SimulatedClock
    log: list[tuple[str, datetime]]
    refuse: str | None = None  # answer every resize with this permanent error

    def list_pools(self) -> Sequence[PoolState]:
        return self.inner.list_pools()

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        self.log.append((self.name, self.clock.now()))
        if self.refuse is not None:
            raise PermanentActuatorError(pool_id, self.refuse)
        return self.inner.resize(pool_id, to_units, key)


@dataclass
class Stage:
    clock: SimulatedClock
    cluster: SimulatedCluster
    attempts: list[tuple[str, datetime]] = field(default_factory=list)
    replicas: list[ScenarioReplica] = field(default_factory=list)

    def add(self, replica: ScenarioReplica, refuse: str | None = None) -> ScenarioReplica:
        replica.deps.actuator = Attempts(replica.deps.actuator, replica.name, self.clock, self.attempts, refuse)
        self.replicas.append(replica)
        return replica

    def play(self, duration: timedelta, alive: list[ScenarioReplica]) -> None:
        """Election every retry period, a tick every minute (and at once for a new leader), in that order."""
        for _ in range(int(duration / RETRY)):
            self.clock.advance(RETRY)
            on_the_minute = self.clock.now().second == 0
            for replica in alive:
                step = replica.assembled.daemon.elect()
                if on_the_minute or step.became_leader:
                    replica.assembled.daemon.tick()

    def leader(self) -> ScenarioReplica:
        (leader,) = [r for r in self.replicas if r.assembled.elector.is_leader(self.clock.now())]
        return leader


def _metric(replica: ScenarioReplica, name: str, labels: dict[str, str]) -> float:
    return replica.assembled.metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
def stage(clock: SimulatedClock) -> Stage:
    settings = helios_settings("http://unused")
    return Stage(clock, SimulatedCluster(settings.pool_specs(), clock))


class Enforcing(Protocol):
    def __call__(
        self, name: str, state: StateStore | None = None, trace_start: datetime | None = None
    ) -> ScenarioReplica: ...


@pytest.fixture
def enforcing(
    stage: Stage,
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
) -> Enforcing:
    """A new enforcing replica on the stage's clock and cluster, with its own link to the fake Kubernetes API."""
    settings = helios_settings(kube_api.url)

    def make(name: str, state: StateStore | None = None, trace_start: datetime | None = None) -> ScenarioReplica:
        kube = api_client_for(link_to().url)
        return scenario_replica(name, settings, stage.clock, stage.cluster, "enforce", kube, state, trace_start)

    return make


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False], ids=["configmap", "separate-stores"])
def test_a_back_off_set_by_one_leader_is_honoured_by_the_next(
    stage: Stage, kube_api: FakeKubeApi, enforcing: Enforcing, shared: bool
) -> None:
    clock = stage.clock
    stage.cluster.add_stockout(POOL, clock.now(), clock.now() + timedelta(hours=2))
    a, b = (
        stage.add(enforcing(name, state=None if shared else InMemoryStateStore(name)))
        for name in ("leadtime-a", "leadtime-b")
    )
    for replica in (a, b):
        replica.assembled.daemon.refit()
    stage.play(TICK, [a, b])
    first = stage.leader()
    second = b if first is a else a
    assert [who for who, _ in stage.attempts] == [first.name]  # the stockout: backed off for the lead time
    backoff_until = first.assembled.loop.agent.memory.backoff_until[POOL]
    if shared:
        saved = kube_api.get("configmaps", "leadtime-state", "leadtime")
        assert saved is not None
        assert decode(saved["data"][KEY]).backoff_until == {POOL: backoff_until}

    stage.play(timedelta(minutes=5), [second])  # the leader dies; the other takes over within a lease + a tick
    assert stage.leader() is second
    assert clock.now() < backoff_until
    tried = [at for who, at in stage.attempts if who == second.name]
    if not shared:  # nothing told it about the stockout: it asks again at once
        assert tried and tried[0] < backoff_until
        return
    assert tried == []
    # it planned with the predecessor's back-off (the planner sends no demand to a pool that backs off)
    assert second.assembled.loop.agent.memory.backoff_until == {POOL: backoff_until}
    assert _metric(second, "leadtime_ticks_total", {"role": "leader", "outcome": "ok"}) >= 4
    stage.play(backoff_until - clock.now() + TICK, [second])
    assert next(at for who, at in stage.attempts if who == second.name) >= backoff_until  # and only after it


@pytest.mark.slow
def test_a_blocked_pool_stays_blocked_when_the_replica_restarts(stage: Stage, enforcing: Enforcing) -> None:
    clock = stage.clock
    why = "403 Forbidden: the service account lacks container.nodePools.update"
    started = clock.now()
    before = stage.add(enforcing("leadtime-a"), refuse=why)
    before.assembled.daemon.refit()
    stage.play(TICK, [before])
    assert len(stage.attempts) == 1
    assert before.assembled.loop.agent.memory.blocked == {POOL: f"pool {POOL!r}: {why}"}
    before.assembled.daemon.stop_working()
    before.assembled.daemon.release()

    # a new process: empty memory, its own ledger, the same pod name and ConfigMap
    after = stage.add(enforcing("leadtime-a", trace_start=started))
    after.assembled.daemon.refit()
    stage.play(timedelta(minutes=5), [after])
    assert stage.leader() is after
    assert after.assembled.loop.agent.memory.blocked == before.assembled.loop.agent.memory.blocked
    assert len(stage.attempts) == 1  # the restarted replica never touched the pool
    assert _metric(after, "leadtime_ticks_total", {"role": "leader", "outcome": "ok"}) >= 5


def test_a_failed_save_neither_fails_the_tick_nor_loses_the_memory(
    stage: Stage, kube_api: FakeKubeApi, enforcing: Enforcing
) -> None:
    clock = stage.clock
    stage.cluster.add_stockout(POOL, clock.now(), clock.now() + timedelta(hours=2))
    leader = stage.add(enforcing("leadtime-a"))
    leader.assembled.daemon.refit()

    def saved() -> object:
        found = kube_api.get("configmaps", "leadtime-state", "leadtime")
        return None if found is None else decode(found["data"][KEY])

    kube_api.fail_next(1, 500, verb="create", resource="configmaps")
    stage.play(RETRY, [leader])  # it leads and ticks: the stockout backs the pool off; saving it answers 500
    memory = leader.assembled.loop.agent.memory
    assert memory.backoff_until and saved() is None
    assert _metric(leader, "leadtime_errors_total", {"error": "StateUnavailable"}) == 1
    assert _metric(leader, "leadtime_ticks_total", {"role": "leader", "outcome": "ok"}) == 1
    assert leader.assembled.health.readiness(clock.now()).ready
    stage.play(TICK, [leader])  # retried on the next tick (on the minute)
    # with the back-off that failed to save; the open stockout alert's last-seen time has moved on since
    assert saved() == leader.assembled.loop.agent.memory
    assert leader.assembled.loop.agent.memory.backoff_until == memory.backoff_until

    # someone else writes the ConfigMap meanwhile: the leader reads it at its next tick, so its write carries the
    # current version (no conflict) and keeps what it learned
    current = kube_api.get("configmaps", "leadtime-state", "leadtime")
    assert current is not None
    kube_api.put("configmaps", {**current, "metadata": {**current["metadata"], "labels": {"edited": "by-hand"}}})
    stage.play(timedelta(minutes=10), [leader])  # the back-off ends; the next attempt backs off again: a change
    assert _metric(leader, "leadtime_errors_total", {"error": "StateConflict"}) == 0
    assert _metric(leader, "leadtime_ticks_total", {"role": "leader", "outcome": "failed"}) == 0
    assert leader.assembled.health.readiness(clock.now()).ready
    assert saved() == leader.assembled.loop.agent.memory != memory


@pytest.mark.slow
def test_the_standby_ledger_has_no_hole_after_it_takes_over(
    stage: Stage, enforcing: Enforcing, caplog: pytest.LogCaptureFixture
) -> None:
    clock = stage.clock
    started = clock.now()
    a, b = (stage.add(enforcing(name)) for name in ("leadtime-a", "leadtime-b"))
    for replica in (a, b):
        replica.assembled.daemon.refit()
    stage.play(timedelta(minutes=30), [a, b])  # to a cell's end: the leader dies as a cell of the grid starts
    first = stage.leader()
    second = b if first is a else a
    handover = clock.now()
    assert (handover - datetime(1970, 1, 1, tzinfo=UTC)) % GRID == timedelta(0)
    # the leader ticked at once when elected, the standby from the first minute on: compare from the first cell of
    # the ledger's grid after both had seen the pools (each tick of a minute: the leader acts, then the standby reads
    # the result); a ledger keeps a cell's readings at the same units as one entry, counted where it starts
    watched = started + TICK
    watched += (GRID - (watched - datetime(1970, 1, 1, tzinfo=UTC)) % GRID) % GRID
    led = first.ledger.spent([POOL], watched, handover)
    assert led > 0  # it scaled up for the replayed demand and paid for it
    assert second.ledger.spent([POOL], watched, handover) == pytest.approx(led, rel=1e-9)
    assert _metric(second, "leadtime_ticks_total", {"role": "standby", "outcome": "ok"}) == 30

    caplog.set_level(logging.WARNING, logger="agent.ledger.meter")
    # the leader dies; the standby takes over after the lease (15 s) and charges its first ticks as leader: a hole
    # would be charged (and warned about) at the first of them
    stage.play(timedelta(minutes=3), [second])
    assert stage.leader() is second
    assert not [r for r in caplog.records if "was not observed" in r.getMessage()]  # no gap charged
    assert second.ledger.spent([POOL], watched, handover) == pytest.approx(led, rel=1e-9)
    assert second.ledger.spent([POOL], handover, clock.now()) > 0


def test_a_standby_that_cannot_read_the_pools_stays_ready_to_lead(stage: Stage, enforcing: Enforcing) -> None:
    clock = stage.clock
    a, b = (stage.add(enforcing(name)) for name in ("leadtime-a", "leadtime-b"))
    stage.play(TICK, [a, b])
    standby = b if stage.leader() is a else a
    standby.deps.cloud_down = True
    stage.play(timedelta(minutes=3), [a, b])
    assert standby.assembled.health.readiness(clock.now()).ready
    assert _metric(standby, "leadtime_errors_total", {"error": "TransientActuatorError"}) == 3
    assert _metric(standby, "leadtime_ticks_total", {"role": "standby", "outcome": "failed"}) == 0
    assert stage.cluster.scale_actions == len([1 for who, _ in stage.attempts if who != standby.name])
