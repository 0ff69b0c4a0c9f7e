"""Prometheus answers that cannot be a demand, on the live loop over HTTP: a negative, infinite or absurdly large
value holds the class's pools with an alert naming the value and the query, and never cordons, drains or deletes
a busy node; a malformed ``result`` for one class holds that class alone."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from kubernetes import client as k8s

from agent.notify import RecordingNotifier
from config import settings_from_mapping
from models import AlertKind, SkipReason
from tests.e2e.rig import CLASS, ON_DEMAND, SPOT, Rig, live_agent
from tests.fakes import kube_objects as objs

MINUTE = timedelta(minutes=1)


def _busy_pool(rig: Rig) -> list[str]:
    """Three nodes whose work the drainer cannot see as accelerator work (it requests none through the pod spec),
    so the demand Prometheus reports is all that keeps them: as in the field report, a wrong reading drains them."""
    rig.add_pools(on_demand_nodes=3)
    nodes = rig.mirror.nodes(ON_DEMAND)
    for i, node in enumerate(nodes):
        rig.kube.put("pods", objs.pod(f"train-{i}", node, namespace=CLASS, owner_kind="ReplicaSet"))
    return nodes


@pytest.mark.parametrize("value", [-50.0, float("inf"), float("-inf"), 1e12])
def test_an_implausible_demand_holds_the_busy_pool_and_alerts_with_the_value_and_the_query(
    rig: Rig, kube_client: k8s.ApiClient, value: float
) -> None:
    nodes = _busy_pool(rig)
    rig.prometheus.set_demand(CLASS, value)
    notifier = RecordingNotifier()
    agent = live_agent(rig, rig.settings(spot_max=0), kube_client, notifier)

    # well past the stabilization window (10m): on the old code, -50 read as "no demand" released all three nodes
    for _ in range(5):
        report = agent.run_once(rig.clock.now())
        assert report.plan.resizes == ()
        assert report.results == ()
        assert [(s.pool_id, s.reason) for s in report.plan.skips] == [(ON_DEMAND, SkipReason.MISSING_DATA)]
        (alert,) = report.alerts
        assert alert.kind is AlertKind.MISSING_DATA
        reason = alert.details[CLASS]
        assert "not a demand" in reason
        assert "kube_pod_container_resource_requests" in reason  # the query
        rig.settle()
        rig.clock.advance(5 * MINUTE)

    assert rig.mirror.nodes(ON_DEMAND) == nodes
    assert all(not rig.kube.get("nodes", n)["spec"].get("unschedulable") for n in nodes)  # type: ignore[index]
    assert rig.gke.calls("POST", "deleteInstances") == 0
    assert rig.gke.calls("POST", "/resize") == 0


@pytest.mark.parametrize(
    "result",
    [
        ["not a series"],
        [{"metric": {}, "values": "24"}],
        [{"metric": {}, "values": [["not a time", "24"]]}],
        [{"metric": {}, "values": [[1, "24", "extra"]]}],
        {"metric": {}, "values": []},
    ],
)
def test_a_malformed_result_holds_only_its_class_with_a_clear_reason(
    rig: Rig, kube_client: k8s.ApiClient, result: Any
) -> None:
    rig.add_pools(spot_nodes=1)
    document = rig.config_document()
    document["demand_classes"].append({"name": "serving", "family": "gpu"})
    document["pools"][0]["serves"] = ["serving"]  # the spot pool serves the other class
    settings = settings_from_mapping(document, source="e2e config")
    rig.prometheus.set_demand(CLASS, 24)
    rig.prometheus.set_result("serving", result)
    agent = live_agent(rig, settings, kube_client, RecordingNotifier())

    report = agent.run_once(rig.clock.now())

    assert report.observed == {CLASS: 24.0}
    assert "malformed answer from Prometheus" in report.problems["serving"]
    assert [(r.pool_id, r.from_units, r.to_units) for r in report.plan.resizes] == [(ON_DEMAND, 0, 3)]
    assert [(s.pool_id, s.reason) for s in report.plan.skips] == [(SPOT, SkipReason.MISSING_DATA)]
