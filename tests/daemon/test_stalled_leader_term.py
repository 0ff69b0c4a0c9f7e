"""A leader whose process stalls (frozen, its VM paused: no election round and no tick) while the other replica takes
the lease over, leads and hands it back, starts a new term when it takes the lease again: its next leader tick
reloads the planner memory the other leader saved and adopts the conditions that leader told, however the election
and the tick threads interleave. Before, the last record it had seen was its own, so the round that took the lease
back reported no new leader: no reload, no LeaderElected Event, and its first leader tick saved its own stale record
of the open conditions over the other leader's (a stockout the other leader told was never resolved).

Whole daemons (real agent loop, election on the Lease, the planner memory in a ConfigMap on the fake Kubernetes API
through the real kubernetes client, a shared simulated cluster and clock).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from kubernetes import client as k8s

from agent.daemon.lease import ElectionStep, LeaseElector
from models import AlertKind
from models.clock import SimulatedClock
from tests.daemon.conftest import NAMESPACE, RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.scenario import ScenarioReplica
from tests.daemon.test_failover_open_conditions import POOL, Pair, _pair
from tests.fakes.kube_api import FakeKubeApi


def _elector(replica: ScenarioReplica) -> LeaseElector:
    elector = replica.assembled.elector
    assert isinstance(elector, LeaseElector)
    return elector


def _elected(kube_api: FakeKubeApi, replica: ScenarioReplica) -> int:
    """How many LeaderElected Events ``replica`` recorded on the Lease."""
    events = kube_api.list("events", namespace=NAMESPACE)
    return sum(1 for e in events if e["reason"] == "LeaderElected" and e["reportingInstance"] == replica.name)


@pytest.mark.parametrize("tick_inside_round", [False, True], ids=["tick-after-the-round", "tick-inside-the-round"])
def test_a_leader_stalled_across_the_other_ones_term_adopts_what_it_told_when_it_leads_again(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    tick_inside_round: bool,
) -> None:
    pair: Pair = _pair(clock, kube_api, link_to, api_client_for, shared=True)
    pair.play(timedelta(minutes=1), pair.replicas)  # a leader, its memory saved
    first = pair.leader()
    second = next(r for r in pair.replicas if r is not first)
    assert _elected(kube_api, first) == 1

    # The first leader's process stalls just after a tick. The second takes the lease once its duration has passed,
    # and its first tick meets a stockout on the pool (emptied: the plan scales it up).
    second.deps.actuator._cluster.resize(POOL, 0, "test-empty")  # type: ignore[attr-defined]
    second.deps.actuator._cluster.add_stockout(POOL, clock.now(), clock.now() + timedelta(seconds=30))  # type: ignore[attr-defined]
    for _ in range(30):
        clock.advance(RETRY)
        if second.assembled.daemon.elect().became_leader:
            second.assembled.daemon.tick()
    assert pair.leader() is second
    assert [e.subject for e in pair.events(second, AlertKind.STOCKOUT, resolved=False)] == [POOL]
    backoff_until = second.assembled.loop.agent.memory.backoff_until[POOL]

    # The second replica stops (a rolling update) and hands the lease over; the first one runs again.
    assert second.assembled.daemon.stop_working(1.0) and second.assembled.daemon.release()
    daemon, elector = first.assembled.daemon, _elector(first)
    if tick_inside_round:  # the tick thread starts a tick once the round has taken the lease, before the round ends
        real_step = elector.step

        def step_then_tick(now: datetime) -> ElectionStep:
            step = real_step(now)
            if step.leading:
                elector.step = real_step  # type: ignore[method-assign]
                daemon.tick()
            return step

        elector.step = step_then_tick  # type: ignore[method-assign]

    resolve_after = first.assembled.loop.agent.settings.alerts.resolve_after
    pair.play(backoff_until - clock.now() + resolve_after + timedelta(minutes=3), [first])
    assert pair.leader() is first
    assert [e.subject for e in pair.events(first, AlertKind.STOCKOUT, resolved=True)] == [POOL]
    assert _elected(kube_api, first) == 2  # a new term, told as such
    lost = [e for e in first.notifier.delivered if e.kind is AlertKind.LEADERSHIP_LOST]
    assert len(lost) == 1 and "held by nobody" in lost[0].details["detail"]
