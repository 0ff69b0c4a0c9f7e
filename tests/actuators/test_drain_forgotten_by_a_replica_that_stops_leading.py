"""A replica that stops leading forgets its drains: leading again, it tells nothing another leader told.

Replica A removes a drain's node past the timeout (GKE takes the deleteInstances, then answers 503 to the autoscaler
bounds' move) and stops leading. Replica B takes the drain over, follows the removal and settles it DONE once the
instance and its Node object are gone, telling ``drain-unfinished-pods`` (the web pod its kubelet could not stop).
A leads again, in the same process: it remembered the removal, listed the drain from that memory, settled it again
and told the warning a second time. A standby tick (the daemon's ``watch``) now forgets what the replica did with
drains (``NodeDrains.forget``, its drainer's memory included), as a restart would: leading again, it takes the drains
still in the cluster's record over again, the cloud asked about each. Real drainer, GKE actuator and
clients, on the fake GKE and Kubernetes APIs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from kubernetes import client as k8s

from agent.daemon.adapters import AgentLoopAdapter, PoolStateRecorder
from agent.loop import Agent
from agent.state import InMemoryStateStore
from models import ActionStatus, AlertEvent, AlertKind
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import (
    BOUNDS,
    MINUTE,
    START,
    _action,
    _cordoned,
    _drains,
    _removal_went_out,
    _rig,
)
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi


class _Leading:
    def is_leader(self, now: object) -> bool:
        return True


def test_a_replica_leading_again_does_not_tell_a_removal_another_leader_settled(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    a = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(a, gke_api, clock)
    assert [p.node for p in a.drains.pending] == [a.node]  # A remembers the removal that went out
    # A stops leading: the daemon's standby ticks watch the pools
    agent = SimpleNamespace(drains=a.drains, watch=lambda now: None, pool_by_id={})
    adapter = AgentLoopAdapter(
        cast(Agent, agent), cast(PoolStateRecorder, None), InMemoryStateStore("a"), _Leading(), clock
    )

    _, _, b = _drains(kube_client, gke_api, clock)  # B leads
    told_b: list[AlertEvent] = []
    statuses_b: list[ActionStatus] = []
    for minute in range(4):
        if minute == 2:  # the instance is deleted, and its Node object and pod go with it
            gke_api.advance()
            kube_api.delete("nodes", a.node)
            kube_api.delete("pods", "web", namespace="default")
        clock.advance(MINUTE)
        b.observe({}, clock.now())
        out = b.continue_pending(clock.now())
        statuses_b += [r.status for r in out.results]
        told_b += out.alerts
        adapter.watch(clock.now())  # A's standby tick
    assert statuses_b[-1] is ActionStatus.DONE
    assert [e.kind for e in told_b] == [AlertKind.DRAIN_UNFINISHED_PODS]
    bounds = gke_api.calls("POST", BOUNDS)

    # A leads again
    told_a: list[AlertEvent] = []
    results_a = []
    for _ in range(3):
        clock.advance(MINUTE)
        a.drains.observe({}, clock.now())
        out = a.drains.continue_pending(clock.now())
        results_a += out.results
        told_a += out.alerts

    assert told_a == []  # was the same drain-unfinished-pods warning again
    assert results_a == []  # was the drain settled DONE again
    assert a.drains.pending == ()
    assert gke_api.calls("POST", BOUNDS) == bounds  # nothing asked of the cloud for it again


def test_a_drain_still_under_way_is_taken_over_again_by_a_replica_leading_again(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """The other side: what A forgets, the cluster's record and the cloud tell it again. Its removal under way
    (nobody settled it meanwhile), A takes the drain over, keeps the node cordoned while the cloud deletes it and
    settles it once it is gone, telling the stuck pod once."""
    clock = SimulatedClock(START)
    a = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(a, gke_api, clock)
    a.drains.forget()  # a standby tick, no other replica leading meanwhile

    told: list[AlertEvent] = []
    statuses: list[ActionStatus] = []
    for minute in range(4):
        if minute == 2:
            gke_api.advance()
        clock.advance(MINUTE)
        a.drains.observe({}, clock.now())
        out = a.drains.continue_pending(clock.now())
        statuses += [r.status for r in out.results]
        told += out.alerts
        if minute < 2:
            assert _cordoned(kube_api, a.node) and _action(gke_api, a.node) == "DELETING"
    assert statuses == [ActionStatus.STARTED, ActionStatus.STARTED, ActionStatus.DONE]
    assert [e.kind for e in told] == [AlertKind.DRAIN_UNFINISHED_PODS]
    assert a.drains.pending == ()
