"""A pool GKE autoscales, under ``gke_autoscaling: refuse`` (the default), is not shrunk by drains either: the
agent's first release of its idle nodes is refused before any node is cordoned, with the permanent error a resize
gets, so the pool is blocked with a critical alert saying to turn autoscaling off or to set move-bounds, and nothing
is sent to it afterwards. Before, the drainer cordoned, emptied and deleted its idle nodes while resizes were
refused."""

from __future__ import annotations

from datetime import timedelta

from kubernetes import client as k8s

from agent.notify import RecordingNotifier
from models import ActionStatus, AlertKind, Severity, SkipReason
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, Rig, live_agent
from tests.fakes import kube_objects as objs

MINUTE = timedelta(minutes=1)


def test_the_idle_nodes_of_a_pool_gke_autoscales_are_not_drained(rig: Rig, kube_client: k8s.ApiClient) -> None:
    rig.add_pools(on_demand_nodes=3)
    autoscaling = {"enabled": True, "totalMinNodeCount": 1, "totalMaxNodeCount": 8}
    rig.gke.pools[NODE_POOLS[ON_DEMAND]].spec["autoscaling"] = autoscaling
    busy, *idle = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train-0", busy, namespace=CLASS, accelerators=8))
    rig.prometheus.set_demand(CLASS, 8)
    agent = live_agent(rig, rig.settings(spot_max=0), kube_client, RecordingNotifier())

    refused = None
    for _ in range(20):
        report = agent.run_once(rig.clock.now())
        if report.results:
            refused = report
            break
        rig.clock.advance(MINUTE)
        rig.settle()
    assert refused is not None, "the idle nodes were never released"
    assert {r.status for r in refused.results} == {ActionStatus.FAILED}
    assert all("GKE autoscaling is on for node pool" in (r.error or "") for r in refused.results)
    blocked_alerts = [a for a in refused.alerts if a.subject == ON_DEMAND and a.kind is AlertKind.ACTUATOR_FAILURE]
    assert [a.severity for a in blocked_alerts] == [Severity.CRITICAL]
    assert "gke_autoscaling: move-bounds" in blocked_alerts[0].details["error"]

    for _ in range(10):
        rig.clock.advance(MINUTE)
        rig.settle()
        later = agent.run_once(rig.clock.now())
        assert later.results == ()
        assert any(s.pool_id == ON_DEMAND and s.reason is SkipReason.PERMANENT_ERROR for s in later.plan.skips)
    assert rig.kube.calls("patch", "nodes") <= 1  # no cordon: at most the uncordon given to a drain taken over
    assert all(not rig.kube.get("nodes", n)["spec"].get("unschedulable") for n in idle)  # type: ignore[index]
    assert rig.gke.calls("POST", "/deleteInstances") == 0
    assert len([i for m in rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs for i in m.instances]) == 3
