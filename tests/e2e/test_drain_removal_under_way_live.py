"""The daemon's tick settles a drain whose removal went out and then failed, after its node left the cluster.

A move-bounds GKE pool of three on-demand nodes: one runs the training job, the other two only a web pod each and are
released. One of them holds a web pod its live kubelet cannot stop, so it is removed at the drain's timeout: GKE takes
the deleteInstances and answers 503 to the autoscaler bounds' move. The node stays cordoned, its Node object leaves
the cluster with its instance (the tick lists drains from the nodes' marks), and the drain's next steps still run:
STARTED while Compute deletes the instance, DONE once it is gone, naming the stuck pod, whose drain-unfinished-pods
warning is told once. The real agent loop on the live parts ``leadtime run`` builds, against the fake GKE, Kubernetes
and Prometheus APIs with the real clients."""

from __future__ import annotations

from datetime import timedelta

from kubernetes import client as k8s

from agent.notify import RecordingNotifier
from config import settings_from_mapping
from models import ActionResult, ActionStatus, AlertEvent, AlertKind, UnfinishedPod
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, SPOT, ZONES, Rig, live_agent
from tests.fakes import kube_objects as objs

MINUTE = timedelta(minutes=1)


def _instance_action(rig: Rig, node: str) -> str | None:
    pool = rig.gke.pools[NODE_POOLS[ON_DEMAND]]
    return next((i.action for m in pool.migs for i in m.instances if i.name == node), None)


def _cordoned(rig: Rig, node: str) -> bool | None:
    """Whether the node is cordoned; None once it left the cluster."""
    found = rig.kube.get("nodes", node)
    return None if found is None else bool(found.get("spec", {}).get("unschedulable"))


def test_a_removal_that_failed_after_it_went_out_is_settled_after_the_node_left_the_cluster(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    bounds = {"enabled": True, "totalMinNodeCount": 3, "totalMaxNodeCount": 3}
    rig.gke.add_pool(NODE_POOLS[SPOT], nodes=0, zones=(ZONES[SPOT],))
    rig.gke.add_pool(NODE_POOLS[ON_DEMAND], nodes=3, zones=(ZONES[ON_DEMAND],), autoscaling=bounds)
    rig.mirror.sync()
    busy, clean, left = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train", busy, namespace=CLASS, accelerators=8))
    for node in (clean, left):
        rig.kube.put("pods", objs.pod(f"web-{node}", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
    rig.kube.hang_pods(left)  # its kubelet posts the node's status but never finishes the evicted pod
    rig.prometheus.set_demand(CLASS, 8)
    document = rig.config_document(spot_max=0)
    for mapping in document["cloud"]["node_pools"]:
        if mapping["pool"] == ON_DEMAND:
            mapping["gke_autoscaling"] = "move-bounds"
    notifier = RecordingNotifier()
    agent = live_agent(rig, settings_from_mapping(document, source="e2e config"), kube_client, notifier)
    agent.run_once(rig.clock.now())
    rig.clock.advance(10 * MINUTE)

    results: list[ActionResult] = []
    raised: list[AlertEvent] = []
    cordoned_after_failure: list[bool | None] = []
    armed = False
    for _ in range(40):
        report = agent.run_once(rig.clock.now())
        mine = [r for r in report.results if r.key.endswith(left)]
        results += mine
        raised += [a for a in report.alerts if a.kind is AlertKind.DRAIN_UNFINISHED_PODS]
        if any(r.status is ActionStatus.DONE for r in report.results):
            rig.settle()  # a removed instance goes, and its node with it
        if not armed and any(r.status is ActionStatus.DONE for r in report.results if r.key.endswith(clean)):
            armed = True  # the next removal (the stuck node's, past the timeout) has its bounds' move refused
            rig.gke.fail_next(1, 503, "The service is currently unavailable.", path=":setAutoscaling")
        if any(r.status is ActionStatus.FAILED for r in mine):
            cordoned_after_failure.append(_cordoned(rig, left))
            rig.mirror.sync()  # its instance is being deleted: the Node object leaves the cluster
        elif _instance_action(rig, left) == "DELETING" and rig.kube.get("nodes", left) is None:
            rig.gke.advance()  # a tick later, Compute has deleted the instance
        rig.clock.advance(MINUTE)
        if any(r.status is ActionStatus.DONE for r in mine):
            break

    assert armed
    statuses = [r.status for r in results]
    failed = statuses.index(ActionStatus.FAILED)
    assert statuses[failed:] == [ActionStatus.FAILED, ActionStatus.STARTED, ActionStatus.DONE], results[failed:]
    assert results[failed].unclear and "503" in (results[failed].error or "")
    assert cordoned_after_failure == [True]  # not given up: cordoned while its instance is being deleted
    assert f"node {left} is being deleted" in results[failed + 1].detail
    done = results[-1]
    assert done.unfinished == (UnfinishedPod("default", f"web-{left}", left, kubelet_gone=False),)
    assert "the cloud deleted it since" in done.detail
    assert rig.kube.get("nodes", left) is None and _instance_action(rig, left) is None
    assert [a.subject for a in raised] == [f"node {left} of {ON_DEMAND} removed with pods still terminating"]
    assert [e.subject for e in notifier.events if e.kind is AlertKind.DRAIN_UNFINISHED_PODS] == [raised[0].subject]
    assert rig.gke.calls("POST", "deleteInstances") == 2  # each released node's, once
    # the node being deleted is out of the cloud's target already: not taken out again, so no node is bought for it
    assert rig.gke.calls("POST", "/resize") == 0
