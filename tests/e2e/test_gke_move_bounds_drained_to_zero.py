"""A pool under ``gke_autoscaling: move-bounds`` drained to zero nodes is not blocked.

The drain of its last node moved GKE's autoscaler bounds to 0-0 once the node's deletion went out; GKE refuses a
maximum of 0 with a permanent 400 (the fake answers as GKE does), so the pool was blocked with a critical alert
every tick while its node was deleted all the same. The bounds at zero nodes are now 0-1: the drain finishes, nothing
is blocked and nothing more is sent to the pool.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kubernetes import client as k8s

from agent.notify import RecordingNotifier
from config.loader import settings_from_mapping
from models import ActionStatus, Severity, SkipReason
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, Rig, live_agent

MINUTE = timedelta(minutes=1)


def test_a_move_bounds_pool_drained_to_zero_nodes_is_not_blocked(rig: Rig, kube_client: k8s.ApiClient) -> None:
    rig.add_pools(on_demand_nodes=1)
    pool = rig.gke.pools[NODE_POOLS[ON_DEMAND]]
    pool.spec["autoscaling"] = {"enabled": True, "totalMinNodeCount": 1, "totalMaxNodeCount": 1}
    document = rig.config_document(spot_max=0)
    for mapping in document["cloud"]["node_pools"]:
        if mapping["pool"] == ON_DEMAND:
            mapping["gke_autoscaling"] = "move-bounds"
    rig.prometheus.set_demand(CLASS, 0)
    agent = live_agent(rig, settings_from_mapping(document, source="e2e config"), kube_client, RecordingNotifier())

    results = []
    for _ in range(40):
        report = agent.run_once(rig.clock.now())
        results += [r for r in report.results if r.pool_id == ON_DEMAND]
        assert not [a for a in report.alerts if a.severity is Severity.CRITICAL], report.alerts
        assert not [s for s in report.plan.skips if s.reason is SkipReason.PERMANENT_ERROR]
        rig.clock.advance(MINUTE)
        rig.settle()

    assert ActionStatus.DONE in {r.status for r in results}, results
    assert not [r for r in results if r.status is ActionStatus.FAILED], results
    assert rig.gke.calls("POST", "/deleteInstances") == 1
    assert rig.mirror.nodes(ON_DEMAND) == []
    assert ON_DEMAND not in agent.memory.blocked
    autoscaling: dict[str, Any] = pool.spec["autoscaling"]
    assert (autoscaling.get("totalMinNodeCount", 0), autoscaling.get("totalMaxNodeCount", 0)) == (0, 1)
