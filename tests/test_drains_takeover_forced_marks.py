"""Drains taken over after a restart or a change of leader, on the fake GKE and Kubernetes APIs with the real
drainer: a drain whose nodes carry no ``leadtime.io/drain-forced`` mark is a release of idle nodes, and demand that
comes back takes it back (uncordoned and unmarked, the node serves at once) before anything is bought; the drain of
a budget's hard stop, whose nodes carry the mark, goes on. Through the whole loop of a restarted agent, through the
daemon's leader-only wrapper for a new leader, and while the marks cannot be read."""

from __future__ import annotations

from collections.abc import Set
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from actuators.base import NodeDrainer
from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import DRAIN_ANNOTATION, FORCED_ANNOTATION, KubernetesNodeDrainer
from agent.daemon.guard import LeaderOnlyDrainer
from agent.drains import NodeDrains
from agent.executor import execute
from agent.loop import Agent
from agent.notify import RecordingNotifier
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import ActionStatus, CapacityPlan, Resize, TransientActuatorError, drain_key
from models.clock import SimulatedClock
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, T0, NodeMirror, Rig, end_process, live_agent
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

MINUTE = timedelta(minutes=1)
WINDOW = 10 * MINUTE  # the rig's planner.scale_down_stabilization
WEB = {"app": "web"}


@pytest.fixture
def rig(gke_api: FakeGkeApi, kube_api: FakeKubeApi, prometheus_api: FakePrometheusApi, tmp_path: Path) -> Rig:
    return Rig(gke_api, kube_api, prometheus_api, SimulatedClock(T0), NodeMirror(gke_api, kube_api), tmp_path)


def _marks(rig: Rig, node: str) -> tuple[bool, dict[str, str]]:
    """Whether the node is cordoned, and the drain marks it carries."""
    found = rig.kube.get("nodes", node)
    assert found is not None
    annotations = found["metadata"].get("annotations") or {}
    ours = {k: v for k, v in annotations.items() if k in (DRAIN_ANNOTATION, FORCED_ANNOTATION)}
    return bool(found["spec"].get("unschedulable")), ours


def _target(rig: Rig) -> int:
    [mig] = rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs
    return mig.target_size


def _release(agent: Agent, rig: Rig, from_units: int, *, forced: bool) -> str:
    """Execute a release of one node as the loop's executor does; the drain waits on the web budget. Returns the
    node being drained."""
    now = rig.clock.now()
    assert agent.drains is not None
    agent.drains.observe({s.pool_id: s for s in agent.parts.actuator.list_pools()}, now)
    reason, key = "budget hard stop" if forced else "idle for 10m", f"{ON_DEMAND}@{now.isoformat()}->{from_units - 1}"
    resize = Resize(ON_DEMAND, from_units, from_units - 1, reason, key, forced=forced)
    done = execute(CapacityPlan(now, (resize,)), agent.parts.actuator, agent.pool_by_id, agent.memory, now,
                   agent.drains)  # fmt: skip
    agent.memory = done.memory
    [result] = [r for r in done.results if r.key.startswith(resize.key)]  # after the drains' own steps
    [node] = [p.node for p in agent.drains.pending if p.key == result.key]
    assert (result.key, result.status) == (drain_key(resize.key, node), ActionStatus.STARTED)
    return node


def _two_drains(rig: Rig, kube: k8s.ApiClient) -> tuple[Agent, str, str]:
    """Three on-demand nodes, one running a training job (8 GPUs, the demand) and two idle, each with a web replica
    under a budget that allows no eviction. Once they are idle for the window, the agent releases one (a plain
    release) and a budget's hard stop the other: both drains wait. Returns the agent, the plain drain's node and
    the forced one's."""
    rig.add_pools(on_demand_nodes=3)
    busy, *idle = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train-0", busy, namespace=CLASS, accelerators=8, owner_kind="Job"))
    for node in idle:
        rig.kube.put("pods", objs.pod(f"web-{node}", node, namespace="web", labels=WEB, owner_kind="ReplicaSet"))
    budget = objs.pdb("web", WEB, namespace="web", min_available=2, expected_pods=2)
    rig.kube.put("poddisruptionbudgets", budget, group="policy")
    rig.prometheus.set_demand(CLASS, 8)
    agent = live_agent(rig, rig.settings(spot_max=0), kube, RecordingNotifier())
    assert agent.run_once(rig.clock.now()).plan.resizes == ()  # the idle nodes are seen idle from now
    rig.clock.advance(WINDOW)
    plain = _release(agent, rig, 3, forced=False)
    forced = _release(agent, rig, 2, forced=True)
    assert {plain, forced} == set(idle)
    (_, plain_marks), (_, forced_marks) = _marks(rig, plain), _marks(rig, forced)
    assert FORCED_ANNOTATION not in plain_marks
    assert forced_marks[FORCED_ANNOTATION] == forced_marks[DRAIN_ANNOTATION]
    assert _target(rig) == 3  # both still in the node pool, cordoned
    return agent, plain, forced


def test_demand_back_after_a_restart_takes_back_the_idle_drain_and_the_forced_one_goes_on(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    agent, plain, forced = _two_drains(rig, kube_client)
    forced_marks = _marks(rig, forced)
    end_process(agent)
    restarted = live_agent(rig, rig.settings(spot_max=0), kube_client, RecordingNotifier())  # memory is gone

    rig.prometheus.set_demand(CLASS, 16)  # a second node's worth of work arrives while both drains wait
    rig.clock.advance(MINUTE)
    grown = restarted.run_once(rig.clock.now())
    [scale_up] = grown.plan.resizes
    assert (scale_up.from_units, scale_up.to_units) == (1, 2)  # planned without the two draining nodes
    [result] = [r for r in grown.results if r.key == scale_up.key]
    assert (result.status, result.detail) == (
        ActionStatus.DONE,
        f"took back 1 draining units ({plain}): uncordoned, they serve at once",
    )
    assert result.taken_back == (plain,)
    assert _target(rig) == 3  # nothing bought, nothing deleted
    assert _marks(rig, plain) == (False, {})  # uncordoned, unmarked: it serves again
    assert _marks(rig, forced) == forced_marks  # the hard stop's drain goes on
    assert rig.kube.get("pods", f"web-{plain}", "web") is not None

    rig.prometheus.set_demand(CLASS, 24)  # more: the forced drain is not taken back, a node is bought
    rig.clock.advance(MINUTE)
    more = restarted.run_once(rig.clock.now())
    [scale_up] = more.plan.resizes
    assert (scale_up.from_units, scale_up.to_units) == (2, 3)
    [result] = [r for r in more.results if r.key == scale_up.key]
    assert result.status is ActionStatus.STARTED and result.taken_back == ()
    assert _target(rig) == 4
    assert _marks(rig, forced) == forced_marks
    assert [i.name for i in rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs[0].instances if i.action == "DELETING"] == []


class _Leading:
    def is_leader(self, now: datetime) -> bool:
        return True


def _drainer(rig: Rig, kube: k8s.ApiClient, kind: type[KubernetesNodeDrainer] = KubernetesNodeDrainer) -> NodeDrainer:
    """The on-demand pool's drainer as a newly started replica builds it: nothing remembered."""
    clients = google_clients(rig.gke.url)
    cluster = f"projects/{rig.gke.project}/locations/{rig.gke.location}/clusters/{rig.gke.cluster}"
    mapping = [NodePoolMapping(pool=ON_DEMAND, node_pool=NODE_POOLS[ON_DEMAND])]
    node_pools = GkeNodePoolActuator(clients.gke, clients.migs, cluster, mapping, rig.clock)
    return kind(KubernetesApi(kube), rig.clock, {ON_DEMAND: NODE_POOLS[ON_DEMAND]}, node_pools)


def test_a_new_leader_takes_back_only_the_drain_its_nodes_do_not_mark_forced(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    """Through the daemon's leader-only wrapper, which passes the drainer's marks on."""
    agent, plain, forced = _two_drains(rig, kube_client)
    forced_marks = _marks(rig, forced)
    end_process(agent)
    guarded = LeaderOnlyDrainer(_drainer(rig, kube_client), _Leading(), rig.clock)
    leader = NodeDrains({ON_DEMAND: guarded}, WINDOW)
    rig.clock.advance(MINUTE)
    now = rig.clock.now()
    seen, _ = leader.observe({s.pool_id: s for s in agent.parts.actuator.list_pools()}, now)
    assert (seen[ON_DEMAND].ready_units, seen[ON_DEMAND].target_units) == (1, 1)
    assert sorted((p.node, p.idle) for p in leader.pending) == sorted([(plain, True), (forced, False)])

    assert leader.take_back(ON_DEMAND, 2, now) == [plain]
    assert _marks(rig, plain) == (False, {})
    assert _marks(rig, forced) == forced_marks
    assert [p.node for p in leader.pending] == [forced]


class _MarksUnreadOnce(KubernetesNodeDrainer):
    """The real drainer, whose first read of the forced marks fails as an API server that does not answer."""

    failures = 1

    def unforced_drains(self, pool_id: str) -> Set[str]:
        if self.failures:
            self.failures -= 1
            raise TransientActuatorError(pool_id, "the Kubernetes API did not answer")
        return super().unforced_drains(pool_id)


def test_a_drain_taken_over_while_its_marks_cannot_be_read_is_taken_back_once_they_are(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    agent, plain, forced = _two_drains(rig, kube_client)
    end_process(agent)
    leader = NodeDrains({ON_DEMAND: _drainer(rig, kube_client, _MarksUnreadOnce)}, WINDOW)
    states = {s.pool_id: s for s in agent.parts.actuator.list_pools()}

    rig.clock.advance(MINUTE)
    seen, _ = leader.observe(states, rig.clock.now())
    assert seen[ON_DEMAND].target_units == 1  # taken over: out of the pool's count all the same
    assert leader.take_back(ON_DEMAND, 2, rig.clock.now()) == []  # not known to be idle releases yet
    assert _marks(rig, plain)[0] and _marks(rig, forced)[0]

    rig.clock.advance(MINUTE)
    leader.observe(states, rig.clock.now())  # asked again
    assert leader.take_back(ON_DEMAND, 2, rig.clock.now()) == [plain]
    assert _marks(rig, plain) == (False, {}) and _marks(rig, forced)[0]
