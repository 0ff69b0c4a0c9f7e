"""What each refusal of an Eviction means for a drain, on the fake Kubernetes and GKE APIs with the real client: a pod
whose namespace is being deleted (403, cause NamespaceTerminating) is waited for, not a permanent error of the pool;
only RBAC's refusal of pods/eviction is; an admission webhook's denial rejects this drain (the node serves again);
a PodDisruptionBudget's 429 names the budget; a 429 from API priority and fairness (no DisruptionBudget cause) is told
as throttling, not as a budget, and no eviction is sent again before its Retry-After."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent.drains import NodeDrains
from models import ActionStatus, PermanentActuatorError, Resize
from tests.actuators import kubernetes_drain_rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned, _evictions
from tests.fakes import kube_objects as objs

cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes


def test_a_pod_in_a_namespace_being_deleted_is_waited_for_and_does_not_block_the_pool(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    c.kube.put("pods", objs.pod("runner-0", node, namespace="ci-123", owner_kind="ReplicaSet"))
    c.kube.terminate_namespace("ci-123")
    drains = NodeDrains({"a": c.drainer}, timedelta(0))
    drains.observe({"a": c.actuator.list_pools()[0]}, c.clock.now())

    out = drains.scale_down(Resize("a", 3, 2, "idle", "r1"), c.clock.now(), [node])

    assert out.permanent == {}
    (started,) = out.results
    assert started.status is ActionStatus.STARTED
    assert "namespace ci-123 is being terminated: the pod goes with it" in started.detail
    assert "{" not in started.detail  # the Status message, not the raw body
    assert _cordoned(c, node)
    c.kube.delete("pods", "runner-0", "ci-123")  # the namespace controller deletes it
    c.clock.advance(timedelta(minutes=1))
    drains.observe({"a": c.actuator.list_pools()[0]}, c.clock.now())
    assert [r.status for r in drains.continue_pending(c.clock.now()).results] == [ActionStatus.DONE]


def test_rbac_refusing_pods_eviction_is_permanent_and_says_what_to_grant(cluster: Cluster) -> None:
    node = cluster.nodes[1]
    cluster.kube.deny_evictions("default")
    with pytest.raises(PermanentActuatorError, match=r'cannot create resource "pods/eviction".*grant the agent'):
        cluster.drainer.drain("a", node, "d")
    assert not _cordoned(cluster, node)


def test_an_admission_webhook_denying_one_pod_rejects_the_drain_not_the_pool(cluster: Cluster) -> None:
    node = cluster.nodes[1]
    cluster.kube.deny_evictions("default", webhook="guard.example.com", reason="web pods are evicted at night")

    result = cluster.drainer.drain("a", node, "d")

    assert result.status is ActionStatus.REJECTED
    assert (
        f'evicting default/web-{node} refused (HTTP 403): admission webhook "guard.example.com" denied the '
        "request: web pods are evicted at night" in result.detail
    )
    assert not _cordoned(cluster, node)


def test_a_budget_refusal_names_the_budget(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    c.kube.put(
        "poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=3, expected_pods=3), group="policy"
    )
    result = c.drainer.drain("a", node, "d")
    assert result.status is ActionStatus.STARTED
    assert "The disruption budget web needs 3 healthy pods and has 3 currently" in result.detail
    c.clock.advance(timedelta(minutes=15))
    gave_up = c.drainer.drain("a", node, "d")
    assert gave_up.status is ActionStatus.FAILED
    assert f"disruption budgets still block [('default', 'web-{node}')] after 0:15:00: The disruption budget web" in (
        gave_up.detail
    )


def test_api_throttling_is_told_as_throttling_and_its_retry_after_is_honoured(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    c.kube.throttle_evictions(100, retry_after_s=90)  # no PodDisruptionBudget exists at all

    first = c.drainer.drain("a", node, "d")

    assert first.status is ActionStatus.STARTED
    assert "throttling requests (HTTP 429 naming no PodDisruptionBudget)" in first.detail
    assert "disruption budget" not in first.detail
    assert _evictions(c, f"web-{node}") == 1
    c.clock.advance(timedelta(seconds=60))
    assert c.drainer.drain("a", node, "d").status is ActionStatus.STARTED
    assert _evictions(c, f"web-{node}") == 1  # before its Retry-After: not sent
    c.clock.advance(timedelta(seconds=31))
    c.drainer.drain("a", node, "d")
    assert _evictions(c, f"web-{node}") == 2
    c.clock.advance(timedelta(minutes=15))
    last = c.drainer.drain("a", node, "d")
    assert last.status is ActionStatus.FAILED
    assert "not evicted after 0:15:00: the Kubernetes API server is throttling requests" in last.detail
    assert "disruption budget" not in last.detail
