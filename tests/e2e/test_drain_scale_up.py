"""Demand that comes back while idle nodes are still draining (a disruption budget says "not now"), on the fake APIs
with the real drainer and the real cloud adapters: the planner sees the pool without its draining nodes, the cloud's
target still counts them, and the scale-up takes draining nodes back (uncordoned, they serve at once) before it grows
the cloud's target by the rest, never past max_units, also after a restart; drains it cannot take back (a budget's
hard stop's) go on. No instance is deleted by the resize (no busy node lost without a drain). Through the whole loop
on GKE node pools, and through the executor on an EKS managed node group."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators.aws_eks import EksNodegroupActuator
from actuators.kubernetes_drain import DRAIN_ANNOTATION, KubernetesNodeDrainer
from agent.drains import NodeDrains
from agent.executor import Execution, execute
from agent.notify import RecordingNotifier
from agent.planning import PlannerMemory
from config.aws import EKS_NODEGROUP_LABEL
from config.schema import PlannerSettings
from kube import KubernetesApi
from models import AcceleratorFamily, ActionStatus, CapacityPlan, CapacityTier, PoolKind, PoolSpec, Resize, drain_key
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import eks_actuator
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, Rig, live_agent
from tests.fakes import kube_objects as objs
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.kube_api import FakeKubeApi

MINUTE = timedelta(minutes=1)
WEB = {"app": "web"}


def _held_by_a_budget(kube: FakeKubeApi, nodes: list[str]) -> None:
    """A web replica (no accelerator: the node stays idle) on each node, under a budget that allows no eviction."""
    for node in nodes:
        kube.put("pods", objs.pod(f"web-{node}", node, namespace="web", labels=WEB, owner_kind="ReplicaSet"))
    budget = objs.pdb("web", WEB, namespace="web", min_available=len(nodes), expected_pods=len(nodes))
    kube.put("poddisruptionbudgets", budget, group="policy")


def _pool() -> PoolSpec:
    return PoolSpec("od", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 16, 12.29,
                    timedelta(minutes=10), (CLASS,))  # fmt: skip


def _cordoned(kube: FakeKubeApi, node: str) -> bool:
    return bool(kube.get("nodes", node)["spec"].get("unschedulable"))  # type: ignore[index]


def test_demand_back_while_gke_nodes_drain_takes_one_back_and_deletes_none(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    rig.add_pools(on_demand_nodes=3)
    busy, *idle = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train-0", busy, namespace=CLASS, accelerators=8, owner_kind="Job"))
    _held_by_a_budget(rig.kube, idle)
    rig.prometheus.set_demand(CLASS, 8)
    agent = live_agent(rig, rig.settings(spot_max=0), kube_client, RecordingNotifier())
    agent.run_once(rig.clock.now())
    rig.clock.advance(10 * MINUTE)

    released = agent.run_once(rig.clock.now())
    [release] = released.plan.resizes
    assert (release.pool_id, release.from_units, release.to_units) == (ON_DEMAND, 3, 1)
    assert sorted((r.key, r.status) for r in released.results) == [
        (drain_key(release.key, node), ActionStatus.STARTED) for node in idle
    ]
    assert all(_cordoned(rig.kube, node) for node in idle)

    rig.prometheus.set_demand(CLASS, 16)  # a second node's worth of work arrives while both drains wait
    rig.clock.advance(MINUTE)
    grown = agent.run_once(rig.clock.now())
    [scale_up] = grown.plan.resizes
    assert (scale_up.from_units, scale_up.to_units) == (1, 2)  # planned without the two draining nodes
    [result] = [r for r in grown.results if r.key == scale_up.key]
    assert result.status is ActionStatus.DONE and result.detail.startswith("took back 1 draining units")
    [mig] = rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs
    assert mig.target_size == 3  # a draining node serves again: nothing bought, nothing deleted
    assert [i.name for i in mig.instances if i.action == "DELETING"] == []
    assert sorted(_cordoned(rig.kube, node) for node in idle) == [False, True]  # the other drain goes on
    assert rig.kube.get("pods", "train-0", CLASS) is not None

    rig.settle()
    rig.clock.advance(MINUTE)
    held = agent.run_once(rig.clock.now())  # the node taken back counts again, the one still draining does not
    assert held.plan.resizes == ()
    assert mig.target_size == 3 and [i.name for i in mig.instances if i.action == "DELETING"] == []


def _eks_group_of_three(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient, max_size: int
) -> tuple[SimulatedClock, EksNodegroupActuator, NodeDrains, str, list[str], list[str]]:
    """An EKS node group of 3 nodes: one busy, two idle held by a budget. Returns the clock, the actuator, the drains,
    the Auto Scaling group, its instance ids and the idle nodes."""
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    aws_api.now = clock.now()
    group = aws_api.add_nodegroup("ml", "p5", nodes=3, max_size=max_size)
    ids = [i["InstanceId"] for i in aws_api.group(group)["Instances"]]
    found = aws_api.direct.ec2.describe_instances(InstanceIds=ids)["Reservations"]
    dns = {i["InstanceId"]: i["PrivateDnsName"] for r in found for i in r["Instances"]}
    for instance_id, name in dns.items():
        kube_api.put("nodes", objs.node(name, "unused", labels={EKS_NODEGROUP_LABEL: "p5"}, instance=instance_id))
    busy, *idle = sorted(dns.values())
    kube_api.put("pods", objs.pod("train-0", busy, namespace=CLASS, accelerators=8, owner_kind="Job"))
    _held_by_a_budget(kube_api, idle)
    eks = eks_actuator(aws_api, clock)
    return clock, eks, _eks_drains(kube_client, clock, eks), group, ids, idle


def _eks_drains(kube_client: k8s.ApiClient, clock: SimulatedClock, eks: EksNodegroupActuator) -> NodeDrains:
    """An agent's drains of the node group; built again, those of a restarted agent, which takes over the drains in
    progress from the nodes' annotations (it may take back those its nodes do not mark forced)."""
    drainer = KubernetesNodeDrainer(
        KubernetesApi(kube_client), clock, {"od": "p5"}, eks, pool_label=EKS_NODEGROUP_LABEL
    )
    return NodeDrains({"od": drainer}, PlannerSettings().scale_down_stabilization)


def test_demand_back_while_drains_taken_over_go_on_raises_the_desired_size_and_terminates_nothing(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    clock, eks, drains, group, ids, idle = _eks_group_of_three(aws_api, kube_api, kube_client, max_size=16)
    pools = {"od": _pool()}
    drains.observe({s.pool_id: s for s in eks.list_pools()}, clock.now())
    clock.advance(PlannerSettings().scale_down_stabilization)

    def tick(
        from_units: int, to_units: int, memory: PlannerMemory, forced: bool = False
    ) -> tuple[PlannerMemory, list[ActionStatus]]:
        now = clock.now()
        seen, _ = drains.observe({s.pool_id: s for s in eks.list_pools()}, now)
        assert seen["od"].target_units == from_units
        key = f"od@{now.isoformat()}->{to_units}"
        plan = CapacityPlan(now, (Resize("od", from_units, to_units, "test", key, forced=forced),))
        done = execute(plan, eks, pools, memory, now, drains)
        return done.memory, [r.status for r in done.results]

    memory, statuses = tick(3, 1, PlannerMemory(), forced=True)  # a budget's hard stop
    assert statuses == [ActionStatus.STARTED, ActionStatus.STARTED]  # both drains wait on the budget
    drains = _eks_drains(kube_client, clock, eks)  # restarted: the drains go on, marked forced: none is taken back
    clock.advance(MINUTE)
    memory, statuses = tick(1, 2, memory)
    assert statuses == [ActionStatus.STARTED] * 3  # the drains go on; the node group grows
    assert (
        aws_api.direct.eks.describe_nodegroup(clusterName="ml", nodegroupName="p5")["nodegroup"]["scalingConfig"][
            "desiredSize"
        ]
        == 4
    )
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0
    instances = [i["InstanceId"] for i in aws_api.group(group)["Instances"]]
    assert set(ids) < set(instances) and len(instances) == 4  # the three, and the one more the plan asked for
    assert all(_cordoned(kube_api, node) for node in idle)


@pytest.mark.parametrize("forced", [False, True])
@pytest.mark.parametrize("restarted", [False, True])
def test_demand_back_while_eks_nodes_drain_at_the_groups_max_size_sends_nothing_past_it(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient, restarted: bool, forced: bool
) -> None:
    """max_units is the node group's max_size, as docs/aws.md advises, and the draining nodes fill the group: the
    scale-up takes one of them back (uncordoned, it serves at once), also after a restart; drains of a budget's hard
    stop are not taken back, so the planned node waits for them. Nothing is sent past the maximum size either way
    (the group would refuse it as held at its maximum, read as a stockout that backs the pool off)."""
    clock, eks, drains, _, _, idle = _eks_group_of_three(aws_api, kube_api, kube_client, max_size=3)
    pools = {"od": replace(_pool(), max_units=3)}
    drains.observe({s.pool_id: s for s in eks.list_pools()}, clock.now())
    clock.advance(PlannerSettings().scale_down_stabilization)

    def tick(from_units: int, to_units: int, memory: PlannerMemory, forced: bool = False) -> Execution:
        now = clock.now()
        seen, _ = drains.observe({s.pool_id: s for s in eks.list_pools()}, now)
        assert seen["od"].target_units == from_units
        key = f"od@{now.isoformat()}->{to_units}"
        plan = CapacityPlan(now, (Resize("od", from_units, to_units, "test", key, forced=forced),))
        return execute(plan, eks, pools, memory, now, drains)

    released = tick(3, 1, PlannerMemory(), forced)
    assert [r.status for r in released.results] == [ActionStatus.STARTED, ActionStatus.STARTED]
    if restarted:
        drains = _eks_drains(kube_client, clock, eks)
    clock.advance(MINUTE)
    grown = tick(1, 2, released.memory)
    assert grown.alerts == () and grown.memory.backoff_until == {}  # no stockout, no back-off
    scaling = aws_api.direct.eks.describe_nodegroup(clusterName="ml", nodegroupName="p5")["nodegroup"]["scalingConfig"]
    assert scaling["desiredSize"] == 3
    assert aws_api.calls("UpdateNodegroupConfig") == 0 and aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0
    *steps, result = grown.results
    assert [r.status for r in steps] == [ActionStatus.STARTED, ActionStatus.STARTED]  # the drains' own steps
    if forced:
        assert result.status is ActionStatus.REJECTED and grown.memory == released.memory
        assert result.detail == (
            "od holds 3 units with 2 still draining and its max_units is 3: 1 of the planned 1 units wait for those "
            "drains to finish (a later plan buys them)"
        )
        assert all(_cordoned(kube_api, node) for node in idle)
        return
    assert result.status is ActionStatus.DONE and grown.memory.last_change["od"] == (clock.now(), +1)
    [back] = [node for node in idle if not _cordoned(kube_api, node)]  # the other one still drains
    assert result.detail == f"took back 1 draining units ({back}): uncordoned, they serve at once"
    assert DRAIN_ANNOTATION not in (kube_api.get("nodes", back)["metadata"].get("annotations") or {})  # type: ignore[index]
