"""The decision Event of a drain whose pods cannot be evicted now names what blocks them: on the fake Kubernetes and
GKE APIs with the real client and drainer, the API server's throttling (a 429 naming no PodDisruptionBudget) and a
namespace being deleted (the NamespaceLifecycle plugin's 403) are told as a ``DrainBlocked`` warning naming that
cause, as a PodDisruptionBudget is; only evicted pods still shutting down are a ``DrainWaiting``. Both were told as
``DrainWaiting``, a Normal Event, as though the pods were on their way out."""

from __future__ import annotations

from datetime import UTC, datetime

from agent.decision_events import DecisionEvent, decision_events
from models import ActionResult, ActionStatus, CapacityPlan
from tests.actuators import kubernetes_drain_rig
from tests.actuators.kubernetes_drain_rig import Cluster
from tests.fakes import kube_objects as objs

cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes


def _event(result: ActionResult) -> DecisionEvent:
    assert result.status is ActionStatus.STARTED
    (event,) = decision_events(CapacityPlan(datetime(2024, 5, 1, tzinfo=UTC)), [result], recommend=False)
    return event


def test_a_drain_the_api_server_throttles_is_told_blocked_by_throttling(cluster: Cluster) -> None:
    c = cluster
    c.kube.throttle_evictions(10, retry_after_s=5)
    event = _event(c.drainer.drain("a", c.nodes[0], "rel-1/drain/" + c.nodes[0]))
    assert (event.reason, event.warning) == ("DrainBlocked", True)
    assert event.message.endswith("(the Kubernetes API server is throttling evictions)")
    assert "(PodDisruptionBudget)" not in event.message


def test_a_drain_waiting_for_a_namespace_being_deleted_is_told_blocked_by_it(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    c.kube.delete("pods", f"web-{node}", "default")
    c.kube.put("pods", objs.pod("runner-0", node, namespace="ci-123", owner_kind="ReplicaSet"))
    c.kube.terminate_namespace("ci-123")
    event = _event(c.drainer.drain("a", node, "rel-1/drain/" + node))
    assert (event.reason, event.warning) == ("DrainBlocked", True)
    assert "namespace ci-123" in event.message
    assert event.message.endswith("(a namespace being deleted, which takes its pods)")


def test_a_budget_blocks_and_pods_shutting_down_wait(cluster: Cluster) -> None:
    c = cluster
    c.kube.put(
        "poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=3, expected_pods=3), group="policy"
    )
    blocked = _event(c.drainer.drain("a", c.nodes[0], "rel-1/drain/" + c.nodes[0]))
    assert (blocked.reason, blocked.warning) == ("DrainBlocked", True)
    assert blocked.message.endswith("(PodDisruptionBudget)")
    c.kube.delete("poddisruptionbudgets", "web", "default", group="policy")
    waiting = _event(c.drainer.drain("a", c.nodes[2], "rel-1/drain/" + c.nodes[2]))  # its web pod shuts down
    assert (waiting.reason, waiting.warning) == ("DrainWaiting", False)
