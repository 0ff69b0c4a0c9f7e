"""A leader tick that follows a time the replica did not lead reloads the planner memory and adopts the open
conditions saved there, however the election and the tick threads interleave. Whole daemons (real agent loop,
election on the Lease, the planner memory in a ConfigMap on the fake Kubernetes API through the real kubernetes
client, a shared simulated cluster and clock):

* a tick that starts while the leader's renewal is in flight across its renew deadline runs as a standby (it forgets
  the open conditions); the renewal then succeeds, so no election round takes the lease: the next leader tick must
  still reload them, or a stockout already told is never resolved (and the leader saves an empty set of them);
* a tick that starts between the election round that takes the lease back (the Lease answers, the renewal counts)
  and the end of that round must reload too: the other replica led in between and told a stockout, whose end this
  replica tells only once it has adopted it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from kubernetes import client as k8s

from agent.daemon.lease import ElectionStep, LeaseElector
from kube.api import Leases
from kube.models import V1Lease
from models import AlertKind
from models.clock import SimulatedClock
from models.errors import KubernetesApiError
from tests.daemon.conftest import DEADLINE, RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.scenario import ScenarioReplica
from tests.daemon.test_failover_open_conditions import POOL, Pair, _pair
from tests.fakes.kube_api import FakeKubeApi


class SlowLeases(Leases):
    """One elector's Lease API whose next replace answers ``delay`` late, ``meanwhile`` running while it is in
    flight (as the scheduler's tick thread would)."""

    def __init__(self, inner: Leases, clock: SimulatedClock, delay: timedelta, meanwhile: Callable[[], None]) -> None:
        self._inner, self._clock, self._delay, self._meanwhile = inner, clock, delay, meanwhile
        self.armed = True

    def read(self, name: str, namespace: str) -> V1Lease:
        return self._inner.read(name, namespace)

    def create(self, namespace: str, body: V1Lease) -> V1Lease:
        return self._inner.create(namespace, body)

    def replace(self, name: str, namespace: str, body: V1Lease) -> V1Lease:
        if self.armed:
            self.armed = False
            self._clock.advance(self._delay)  # the renew deadline passes while the renewal is in flight
            self._meanwhile()
        return self._inner.replace(name, namespace, body)


class UnansweredLeases(Leases):
    """One elector's Lease API while the API server does not answer it (``down``), as the client reports a timeout."""

    def __init__(self, inner: Leases) -> None:
        self._inner, self.down = inner, True

    def read(self, name: str, namespace: str) -> V1Lease:
        if self.down:
            raise KubernetesApiError(None, "timed out")
        return self._inner.read(name, namespace)

    def create(self, namespace: str, body: V1Lease) -> V1Lease:
        if self.down:
            raise KubernetesApiError(None, "timed out")
        return self._inner.create(namespace, body)

    def replace(self, name: str, namespace: str, body: V1Lease) -> V1Lease:
        if self.down:
            raise KubernetesApiError(None, "timed out")
        return self._inner.replace(name, namespace, body)


def _elector(replica: ScenarioReplica) -> LeaseElector:
    elector = replica.assembled.elector
    assert isinstance(elector, LeaseElector)
    return elector


def _until_resolved(pair: Pair, leader: ScenarioReplica, backoff_until: datetime) -> timedelta:
    """Long enough for the pool's back-off to end, the stockout to be gone its resolve_after, and a few ticks."""
    resolve_after = leader.assembled.loop.agent.settings.alerts.resolve_after
    return backoff_until - pair.clock.now() + resolve_after + timedelta(minutes=3)


@pytest.mark.parametrize("tick_meanwhile", [False, True], ids=["no-tick-in-flight", "tick-during-renewal"])
def test_a_stockout_told_is_resolved_after_a_tick_ran_as_standby_during_a_slow_renewal(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    tick_meanwhile: bool,
) -> None:
    pair = _pair(clock, kube_api, link_to, api_client_for, shared=True, stockout=True)
    pair.play(timedelta(minutes=1), pair.replicas)
    leader = pair.leader()
    other = next(r for r in pair.replicas if r is not leader)
    assert [e.subject for e in pair.events(leader, AlertKind.STOCKOUT, resolved=False)] == [POOL]
    backoff_until = leader.assembled.loop.agent.memory.backoff_until[POOL]
    daemon, elector = leader.assembled.daemon, _elector(leader)

    # The leader's renewals did not get through for 9 s; one sent 1 s before its renew deadline is answered 2 s
    # later, within the client's timeout.
    clock.advance(DEADLINE - timedelta(seconds=1))
    other.assembled.daemon.elect()
    standby_ticks = [0]

    def tick() -> None:
        if tick_meanwhile:
            assert not elector.is_leader(clock.now())  # this tick runs as a standby's
            daemon.tick()
            standby_ticks[0] += 1

    slow = SlowLeases(elector._leases, clock, timedelta(seconds=2), tick)
    elector._leases = slow  # the same calls, answered late
    step = daemon.elect()
    assert step.leading and not step.became_leader and not step.lost_leadership
    assert standby_ticks == [1 if tick_meanwhile else 0]
    clock.advance(timedelta(seconds=1))  # back on the 2 s grid the pair plays on

    pair.play(_until_resolved(pair, leader, backoff_until), pair.replicas)
    assert pair.leader() is leader
    assert [e.subject for e in pair.events(leader, AlertKind.STOCKOUT, resolved=True)] == [POOL]
    assert leader.assembled.loop.agent.memory.open_conditions == {}  # ended, and saved so


@pytest.mark.parametrize("tick_inside_round", [False, True], ids=["tick-after-the-round", "tick-inside-the-round"])
def test_a_lease_taken_back_between_two_ticks_adopts_what_the_other_leader_told(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    tick_inside_round: bool,
) -> None:
    pair = _pair(clock, kube_api, link_to, api_client_for, shared=True)
    pair.play(timedelta(minutes=1), pair.replicas)  # a leader, its memory saved
    first = pair.leader()
    second = next(r for r in pair.replicas if r is not first)
    first_elector = _elector(first)

    # The first leader's Lease API stops answering just after a tick; the second takes the lease once its duration
    # has passed, and its first tick meets a stockout on the pool (emptied: the plan scales it up).
    cut = UnansweredLeases(first_elector._leases)
    first_elector._leases = cut
    second.deps.actuator._cluster.resize(POOL, 0, "test-empty")  # type: ignore[attr-defined]
    second.deps.actuator._cluster.add_stockout(POOL, clock.now(), clock.now() + timedelta(seconds=30))  # type: ignore[attr-defined]
    for _ in range(15):
        clock.advance(RETRY)
        first.assembled.daemon.elect()  # no tick of the first replica in between: it ticks once a minute
        if second.assembled.daemon.elect().became_leader:
            second.assembled.daemon.tick()
    assert pair.leader() is second
    assert [e.subject for e in pair.events(second, AlertKind.STOCKOUT, resolved=False)] == [POOL]
    backoff_until = second.assembled.loop.agent.memory.backoff_until[POOL]

    # The second replica stops (a rolling update): it hands the lease over; the first one's API answers again and
    # takes it at once, before its next tick.
    assert second.assembled.daemon.stop_working(1.0) and second.assembled.daemon.release()
    cut.down = False
    clock.advance(RETRY)
    daemon = first.assembled.daemon
    if tick_inside_round:  # the tick thread starts a tick once the round has taken the lease, before the round ends
        real_step = first_elector.step

        def step_then_tick(now: datetime) -> ElectionStep:
            taken = real_step(now)
            daemon.tick()
            return taken

        first_elector.step = step_then_tick  # type: ignore[method-assign]
        assert daemon.elect().became_leader
        first_elector.step = real_step  # type: ignore[method-assign]
    else:
        assert daemon.elect().became_leader
        daemon.tick()

    pair.play(_until_resolved(pair, first, backoff_until), [first])
    assert pair.leader() is first
    assert [e.subject for e in pair.events(first, AlertKind.STOCKOUT, resolved=True)] == [POOL]
