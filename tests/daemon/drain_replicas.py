"""Two daemons draining one GKE node pool: each a real ``Daemon`` with its elector on the fake Kubernetes API (the
Lease), whose loop is the daemon's ``AgentLoopAdapter`` (its ``resume`` and ``run_once`` the real ones: the planner
memory, shared by the replicas, loaded at the first leader tick of a term and saved after each) around an agent whose
tick runs the drains only, through the real drainer (wrapped in the daemon's ``LeaderOnlyDrainer``), GKE actuator
and clients on the fake GKE and Kubernetes APIs. One simulated clock; the test plays the scheduler, a minute at a
time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import cast

from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.daemon.adapters import AgentLoopAdapter, PoolStateRecorder
from agent.daemon.guard import LeaderOnlyDrainer
from agent.daemon.health import HealthState
from agent.daemon.lease import LeaseElector
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.service import Daemon
from agent.drains import NodeDrains
from agent.loop import Agent, TickReport
from agent.notify import RecordingNotifier
from agent.planning import PlannerMemory
from agent.state import InMemoryStateStore
from models import ActionResult, ActionStatus, AlertEvent, CapacityPlan, Resize
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import BOUNDS, MINUTE, UNAVAILABLE, _drains, _pool
from tests.daemon.conftest import DEADLINE, RETRY, MakeElector
from tests.daemon.elector_hooks import ElectorHooks
from tests.daemon.links import CuttableLink
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

DELETES = "/deleteInstances"
# Something the test has a leader's tick do after its drains' steps (start a drain, take drains back for a
# scale-up), as the executor would: its results.
Act = Callable[[NodeDrains, datetime], Sequence[ActionResult]]


class DrainsAgent:
    """An agent that has drains only, as the daemon's adapter drives it (the planner memory loaded at the first tick
    of a term and saved after each, the drains settled carried in it): its tick observes the drains in progress (the
    cluster's record of them), steps each, then does what the test asked for (``acts``). A standby tick watches
    nothing."""

    def __init__(self, drains: NodeDrains) -> None:
        self.drains = drains
        self.memory = PlannerMemory()
        self.pool_by_id: dict[str, object] = {}
        self.classes: list[object] = []
        self.conditions = SimpleNamespace(adopt=lambda *_: None)
        self.parts = SimpleNamespace(short_slices=None)
        self.budget_watch = SimpleNamespace(stand_by=lambda: None, restore=lambda _: None, waited=())
        self.acts: list[Act] = []
        self.results: list[ActionResult] = []
        self.told: list[AlertEvent] = []

    def watch(self, now: datetime, *, leading: bool = False) -> None:
        return None

    def run_once(self, now: datetime) -> TickReport:
        self.drains.observe({}, now)
        out = self.drains.continue_pending(now)
        self.results += out.results
        self.told += out.alerts
        while self.acts:
            self.results += self.acts.pop(0)(self.drains, now)
        return TickReport(now, {}, {}, {}, CapacityPlan(now), ())


class DrainsLoop(AgentLoopAdapter):
    """The daemon's adapter (its ``resume`` and ``run_once`` the real ones) around a ``DrainsAgent``; ``store``: the
    planner memory's store, shared by the replicas."""

    def __init__(
        self,
        drains: NodeDrains,
        store: InMemoryStateStore,
        elector: LeaseElector,
        gke: GkeNodePoolActuator,
        clock: SimulatedClock,
    ) -> None:
        self.drains_agent = DrainsAgent(drains)
        super().__init__(cast(Agent, self.drains_agent), PoolStateRecorder(gke), store, elector, clock)
        self.drains = drains
        self.store = store

    @property
    def acts(self) -> list[Act]:
        return self.drains_agent.acts

    @property
    def results(self) -> list[ActionResult]:
        return self.drains_agent.results

    @property
    def told(self) -> list[AlertEvent]:
        return self.drains_agent.told


@dataclass
class DrainReplica:
    name: str
    daemon: Daemon
    elector: LeaseElector
    link: CuttableLink
    loop: DrainsLoop
    drainer: KubernetesNodeDrainer
    gke: GkeNodePoolActuator
    hooks: ElectorHooks

    @property
    def drains(self) -> NodeDrains:
        return self.loop.drains


def drain_replica(
    name: str,
    store: InMemoryStateStore,
    elector_for: MakeElector,
    kube_client: k8s.ApiClient,
    gke_api: FakeGkeApi,
    clock: SimulatedClock,
) -> DrainReplica:
    """A replica of its own (drainer and GKE actuator with their own memory) on the shared fake APIs; ``store``: its
    view of the planner memory the replicas share."""
    hooks = ElectorHooks(clock)
    elector, link = elector_for(name, hooks)
    gke, drainer, _ = _drains(kube_client, gke_api, clock)
    drains = NodeDrains({"gpu": LeaderOnlyDrainer(drainer, elector, clock)}, timedelta(0))
    loop = DrainsLoop(drains, store, elector, gke, clock)
    daemon = Daemon(
        loop,
        elector,
        clock=clock,
        metrics=DaemonMetrics(),
        health=HealthState(max_tick_age=3 * MINUTE, max_tick_duration=10 * MINUTE),
        notifier=RecordingNotifier(dedup_window=timedelta(0)),
        mode="enforce",
        contact_bound=DEADLINE,
    )
    return DrainReplica(name, daemon, elector, link, loop, drainer, gke, hooks)


def minute(clock: SimulatedClock, leader: DrainReplica, *others: DrainReplica, standby_tick: bool = False) -> None:
    """A minute later, each replica's election round, the leader's first (its renewal, later than its renew deadline:
    the Lease still names it, nobody else led), then each one's tick. ``standby_tick``: the leader's tick runs once
    before its round too, as a standby's (its renewal had not got through yet)."""
    clock.advance(MINUTE)
    if standby_tick:
        leader.daemon.tick()
    for replica in (leader, *others):
        replica.daemon.elect()
    assert leader.elector.is_leader(clock.now())
    for replica in (leader, *others):
        replica.daemon.tick()


def hand_over(
    clock: SimulatedClock,
    old: DrainReplica,
    new: DrainReplica,
    released: bool = False,
    tick_in_round: bool = False,
    answer_lost: bool = False,
    frozen: bool = False,
) -> None:
    """``new`` takes the lease from ``old`` and ticks as the leader. ``released``: ``old`` stops (a rolling update)
    and hands the lease over; ``frozen``: ``old``'s process stalls (a paused VM), no round or tick of it runs until
    the test runs them again; else its Lease API stops answering, and ``old``, its API back, ticks as a standby. Not
    released, ``new`` takes the lease once it has seen ``old``'s record unchanged for the lease duration.
    ``tick_in_round``: the tick thread starts ``new``'s first tick as leader inside the round that took the lease,
    once the round has the answer of its write (``is_leader`` true), before the round returns (``ElectorHooks``).
    ``answer_lost``: the API server applies ``new``'s take and its answer is lost (a read timeout); the next round
    finds the record naming ``new`` and renews it."""
    if released:
        assert old.daemon.stop_working(1.0) and old.daemon.release()
    elif not frozen:
        old.link.cut()
    if answer_lost:
        new.hooks.answers_lost = 1
    if tick_in_round:
        new.hooks.in_round = new.daemon.tick
    for _ in range(20):
        clock.advance(RETRY)
        if not (released or frozen):
            old.daemon.elect()
        step = new.daemon.elect()
        if step.leading:
            break
    assert step.became_leader and step.new_term, step
    assert new.hooks.in_round is None and new.hooks.answers_lost == 0  # the tick ran inside the round; answer lost
    if not tick_in_round:
        new.daemon.tick()
    if not (released or frozen):
        old.link.restore()
        assert not old.daemon.elect().leading
        old.daemon.tick()


def drain_pair(
    clock: SimulatedClock,
    elector_for: MakeElector,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    gke_api: FakeGkeApi,
) -> tuple[DrainReplica, DrainReplica, str]:
    """Replicas A (leading, its first tick run) and B (standby) and the node A is to drain: the first of a move-bounds
    pool of three (bounds 3-3), running a web pod its live kubelet cannot stop."""
    node = _pool(kube_api, gke_api, clock)[0]
    kube_api.put("pods", objs.pod("web", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
    kube_api.hang_pods(node)
    store = InMemoryStateStore("replica-a")
    a = drain_replica("replica-a", store, elector_for, kube_client, gke_api, clock)
    b = drain_replica("replica-b", store.replica("replica-b"), elector_for, kube_client, gke_api, clock)
    assert a.daemon.elect().leading and not b.daemon.elect().leading
    a.daemon.tick()
    b.daemon.tick()
    return a, b, node


def drain(node: str) -> Act:
    """A release of ``node``, as the executor carries out a planned scale-down from 3 to 2."""
    return lambda drains, now: drains.scale_down(Resize("gpu", 3, 2, "idle", "release"), now, [node]).results


def until_removal_went_out(
    clock: SimulatedClock, gke_api: FakeGkeApi, leader: DrainReplica, *others: DrainReplica
) -> None:
    """Minutes until the leader's drain removes its node past the timeout: GKE takes the deleteInstances and answers
    503 to the bounds' move, and the cloud deletes the instance."""
    gke_api.fail_next(1, 503, UNAVAILABLE, path=BOUNDS)
    for _ in range(40):
        minute(clock, leader, *others)
        if gke_api.calls("POST", DELETES):
            break
    assert gke_api.calls("POST", DELETES) == 1
    assert leader.loop.results[-1].unclear, leader.loop.results[-1]  # it went out, the bounds' move failed


def until_left_deleting(
    clock: SimulatedClock, gke_api: FakeGkeApi, leader: DrainReplica, *others: DrainReplica
) -> None:
    """Minutes from the leader's drain until it ends with its node left cordoned: its removal goes out
    (``until_removal_went_out``) and the cloud still deletes the instance when the drain's wait for it ends."""
    until_removal_went_out(clock, gke_api, leader, *others)
    for _ in range(30):
        minute(clock, leader, *others)
        if leader.loop.results[-1].status is ActionStatus.FAILED:
            return
    raise AssertionError(f"the drain did not end in 30 minutes: {leader.loop.results[-1]}")


def gone(gke_api: FakeGkeApi, kube_api: FakeKubeApi, node: str) -> None:
    """The instance is deleted, and its Node object and pod go with it."""
    gke_api.advance()
    kube_api.delete("nodes", node)
    kube_api.delete("pods", "web", namespace="default")


def bounds(gke_api: FakeGkeApi) -> tuple[int, int]:
    """GKE's autoscaler bounds of the pool: its total minimum and maximum node counts."""
    autoscaling = gke_api.pools["a100"].spec["autoscaling"]
    return autoscaling["totalMinNodeCount"], autoscaling["totalMaxNodeCount"]
