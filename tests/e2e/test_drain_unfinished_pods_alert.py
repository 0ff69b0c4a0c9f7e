"""A drain that removes its node with pods that never finished terminating tells the operator, once.

At the drain's timeout a node left only with pods no kubelet finishes (left by a kubelet that is gone, its node
``Ready`` Unknown; or stuck on a live kubelet that could not stop their containers) is removed anyway. The drain
ended DONE, the pods named in its detail and a log line, and nothing reached Slack or the alert log: the work of
those pods may be lost, and a kubelet that cannot stop containers points at a broken node or runtime. The real agent
loop on the live parts ``leadtime run`` builds, against the fake GKE, Kubernetes and Prometheus APIs with the real
clients and drainer; each tick delivers its alerts to a recording notifier (the Slack notifier's de-duplication)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from kubernetes import client as k8s

from agent.loop import Agent
from agent.notify import RecordingNotifier
from models import ActionResult, ActionStatus, AlertEvent, AlertKind, Severity, UnfinishedPod
from tests.e2e.rig import CLASS, ON_DEMAND, Rig, live_agent
from tests.fakes import kube_objects as objs

MINUTE = timedelta(minutes=1)
TICKS = 40  # past the drain's timeout (15m), the pod's grace period and STUCK_AFTER, and alerts.resolve_after after


def _release_two(rig: Rig, kube: k8s.ApiClient) -> tuple[Agent, RecordingNotifier, str, str]:
    """Three on-demand nodes: one runs the training job demand needs, the other two only a web pod each (a
    ReplicaSet's). The agent, ticked once; both idle nodes are released once idle for the 10-minute window."""
    rig.add_pools(on_demand_nodes=3)
    busy, clean, left = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train", busy, namespace=CLASS, accelerators=8))
    for node in (clean, left):
        rig.kube.put("pods", objs.pod(f"web-{node}", node, labels={"app": "web"}, owner_kind="ReplicaSet"))
    rig.prometheus.set_demand(CLASS, 8)
    notifier = RecordingNotifier()
    agent = live_agent(rig, rig.settings(spot_max=0), kube, notifier)
    agent.run_once(rig.clock.now())
    rig.clock.advance(10 * MINUTE)
    return agent, notifier, clean, left


def _run(rig: Rig, agent: Agent, stop_kubelet: str | None) -> tuple[list[ActionResult], dict[int, list[AlertEvent]]]:
    """``TICKS`` ticks a minute apart (the first one starts the drains): the drains' results, and the alerts of a
    removal with pods still terminating each tick raised. ``stop_kubelet``: that node's kubelet dies right after the
    drain evicted its pod."""
    results: list[ActionResult] = []
    raised: dict[int, list[AlertEvent]] = {}
    for tick in range(TICKS):
        report = agent.run_once(rig.clock.now())
        results += report.results
        if told := [a for a in report.alerts if a.kind is AlertKind.DRAIN_UNFINISHED_PODS]:
            raised[tick] = told
        if tick == 0 and stop_kubelet:
            rig.kube.stop_kubelet(stop_kubelet)
        if any(r.status is ActionStatus.DONE for r in report.results):
            rig.settle()  # the instance goes, and its node with it
        rig.clock.advance(MINUTE)
    return results, raised


@pytest.mark.parametrize("kubelet", ["alive, stuck", "gone"])
def test_a_node_removed_with_pods_still_terminating_is_told_once_and_one_drained_clean_not(
    rig: Rig, kube_client: k8s.ApiClient, kubelet: str
) -> None:
    agent, notifier, clean, left = _release_two(rig, kube_client)
    gone = kubelet == "gone"
    if not gone:
        rig.kube.hang_pods(left)  # its kubelet posts the node's status but never finishes the evicted pod

    results, raised = _run(rig, agent, stop_kubelet=left if gone else None)

    by_node = {node: [r for r in results if r.key.endswith(node)] for node in (clean, left)}
    assert [r.status for r in by_node[clean]] == [ActionStatus.STARTED, ActionStatus.DONE]  # emptied, then removed
    assert [r.status for r in by_node[left]][:2] == [ActionStatus.STARTED, ActionStatus.STARTED]
    [removed] = [r for r in by_node[left] if r.status is ActionStatus.DONE]
    assert len(results) == len(by_node[clean]) + len(by_node[left])
    assert by_node[clean][-1].unfinished == ()
    assert removed.unfinished == (UnfinishedPod("default", f"web-{left}", left, kubelet_gone=gone),)
    assert rig.gke.calls("POST", "deleteInstances") == 2

    [(tick, [alert])] = raised.items()  # raised once, by the tick that removed the node, never again
    assert tick == (removed.at - results[0].at) // MINUTE
    [told] = [e for e in notifier.events if e.kind is AlertKind.DRAIN_UNFINISHED_PODS]
    assert told == alert
    assert [e for e in notifier.events if e.subject == told.subject] == [told]  # no repeat, no "resolved"
    assert (told.severity, told.resolved) == (Severity.WARNING, False)
    assert told.subject == f"node {left} of {ON_DEMAND} removed with pods still terminating"
    assert f"Node {left} of pool {ON_DEMAND} was removed by its drain (key {removed.key})" in told.summary
    assert "Work they had not saved" in told.summary
    assert told.details["drain key"] == removed.key
    assert told.details["drain"] == removed.detail
    if gone:
        assert f"default/web-{left} was left by a kubelet that stopped posting its node's status" in told.summary
        assert told.details["left by a dead kubelet"] == f"default/web-{left} on {left}"
        assert "stuck on a live kubelet" not in told.details
    else:
        assert f"default/web-{left} was stuck terminating on a live kubelet" in told.summary
        assert "broken node or container runtime" in told.summary
        assert told.details["stuck on a live kubelet"] == f"default/web-{left} on {left}"
        assert "left by a dead kubelet" not in told.details
