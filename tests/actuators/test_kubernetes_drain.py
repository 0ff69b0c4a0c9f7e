"""KubernetesNodeDrainer on the fake Kubernetes API, removing nodes through GkeNodePoolActuator on the fake GKE and
Compute Engine APIs: the course of a drain and how it ends. Disruption budgets respected (429 waits, never force),
misconfigured budgets, evictions that keep failing or are refused for good, a node the cloud will not remove,
timeouts uncordon, leadership lost mid-drain, nodes gone during their drain, and only the drained node is removed.
Which pods block a drain: ``test_kubernetes_drain_pod_rules.py``; waiting for evicted pods to shut down:
``test_kubernetes_drain_shutdown.py``; which nodes are idle and their order: ``test_kubernetes_drain_node_choice.py``;
the API calls a drain and a survey make: ``test_kubernetes_drain_api_calls.py``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest

from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from models import (
    ActionResult,
    ActionStatus,
    PermanentActuatorError,
    Resize,
    TransientActuatorError,
)
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned, _evictions
from tests.fakes import kube_objects as objs

cluster = rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes


def test_pdb_refusal_waits_and_only_the_drained_node_is_removed(cluster: Cluster) -> None:
    budget = objs.pdb("web", {"app": "web"}, min_available=3, expected_pods=3)
    cluster.kube.put("poddisruptionbudgets", budget, group="policy")
    node = cluster.nodes[1]

    waiting = cluster.drainer.drain("a", node, "drain-1")
    assert waiting.status is ActionStatus.STARTED
    assert "disruption budgets" in waiting.detail
    assert _cordoned(cluster, node)
    assert cluster.kube.get("pods", f"web-{node}", "default") is not None  # refused, not forced
    assert cluster.gke.calls("POST", "deleteInstances") == 0

    replacement = objs.pod("web-replacement", cluster.nodes[0], labels={"app": "web"}, owner_kind="ReplicaSet")
    cluster.kube.put("pods", replacement)  # 4 healthy
    cluster.clock.advance(timedelta(minutes=1))
    evicted = cluster.drainer.drain("a", node, "drain-1")  # the same key continues the drain
    assert evicted.status is ActionStatus.STARTED  # the pod shuts down within its grace period (30 s by default)
    assert cluster.gke.calls("POST", "deleteInstances") == 0
    cluster.clock.advance(timedelta(seconds=30))
    done = cluster.drainer.drain("a", node, "drain-1")
    assert done.status is ActionStatus.DONE
    assert cluster.kube.get("pods", f"web-{node}", "default") is None
    assert cluster.kube.get("pods", f"logs-{node}", "kube-system") is not None  # DaemonSet pods stay
    assert cluster.gke.calls("POST", "deleteInstances") == 1
    assert cluster.instances() == [(n, "DELETING" if n == node else "NONE") for n in cluster.nodes]
    assert cluster.gke.pools["a100"].migs[0].target_size == 2
    assert cluster.kube.calls("delete", "pods") == 0


def test_a_drain_blocked_past_the_timeout_gives_up_and_uncordons(cluster: Cluster) -> None:
    cluster.kube.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=3), group="policy")
    node = cluster.nodes[0]
    assert cluster.drainer.drain("a", node, "d").status is ActionStatus.STARTED
    cluster.clock.advance(timedelta(minutes=14))
    assert cluster.drainer.drain("a", node, "d").status is ActionStatus.STARTED
    cluster.clock.advance(timedelta(minutes=1))
    gave_up = cluster.drainer.drain("a", node, "d")
    assert gave_up.status is ActionStatus.FAILED
    assert not _cordoned(cluster, node)
    assert cluster.gke.calls("POST", "deleteInstances") == 0
    assert cluster.drainer.drain("a", node, "d") == gave_up  # settled: the key is spent


def test_a_pod_under_two_disruption_budgets_rejects_the_drain(cluster: Cluster) -> None:
    node = cluster.nodes[1]
    cluster.kube.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, max_unavailable=1), group="policy")
    cluster.kube.put("poddisruptionbudgets", objs.pdb("web-too", {"app": "web"}, max_unavailable=1), group="policy")
    result = cluster.drainer.drain("a", node, "d")
    assert result.status is ActionStatus.REJECTED
    assert f"('default', 'web-{node}')" in result.detail and "more than one PodDisruptionBudget" in result.detail
    assert not _cordoned(cluster, node)
    assert cluster.kube.get("pods", f"web-{node}", "default") is not None
    assert cluster.gke.calls("POST", "deleteInstances") == 0
    assert cluster.drainer.drain("a", node, "d") == result  # settled: not retried every tick
    assert _evictions(cluster, f"web-{node}") == 1


def test_an_eviction_that_keeps_failing_gives_up_at_the_timeout(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    cluster.kube.fail_next(100, 503, verb="create", resource="pods")  # every eviction fails
    with pytest.raises(TransientActuatorError):
        cluster.drainer.drain("a", node, "d")
    assert _cordoned(cluster, node)  # retried on the next tick with the same key
    cluster.clock.advance(timedelta(minutes=15))
    gave_up = cluster.drainer.drain("a", node, "d")
    assert gave_up.status is ActionStatus.FAILED
    assert f"still failing after 0:15:00: HTTP 503: evicting default/web-{node}: " in gave_up.detail
    assert not _cordoned(cluster, node)
    assert cluster.gke.calls("POST", "deleteInstances") == 0


def test_an_eviction_refused_for_good_uncordons_the_node(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    cluster.kube.deny_evictions("default")  # RBAC refuses the eviction
    with pytest.raises(PermanentActuatorError, match='cannot create resource "pods/eviction"'):
        cluster.drainer.drain("a", node, "d")
    assert not _cordoned(cluster, node)
    assert cluster.drainer.draining_nodes("a") == {}


def test_an_empty_node_the_cloud_will_not_remove_is_uncordoned_at_the_timeout(cluster: Cluster) -> None:
    """A group at its minimum size, or a cloud API that keeps failing: the node is back in service after the
    drain timeout instead of sitting cordoned, paid for and unusable."""
    node = cluster.nodes[0]
    cluster.gke.fail_next(100, 503, "backend unavailable", path="deleteInstances")
    assert cluster.drainer.drain("a", node, "d").status is ActionStatus.STARTED  # its pod shuts down first
    cluster.clock.advance(timedelta(minutes=1))
    with pytest.raises(TransientActuatorError):
        cluster.drainer.drain("a", node, "d")
    assert _cordoned(cluster, node)  # retried on the next tick with the same key
    cluster.clock.advance(timedelta(minutes=15))
    gave_up = cluster.drainer.drain("a", node, "d")
    assert gave_up.status is ActionStatus.FAILED
    assert gave_up.detail.startswith("removing the empty node still fails after 0:15:00")
    assert not _cordoned(cluster, node)
    assert cluster.drainer.draining_nodes("a") == {}


def test_leadership_lost_in_the_middle_of_a_drain_stops_it_before_the_next_write(cluster: Cluster) -> None:
    """Through the daemon's leader-only wrapper: checked before every eviction and the removal, not only when the
    drain call starts; the node keeps its drain annotation, so the new leader continues the drain."""
    from agent.daemon.guard import LeaderOnlyDrainer

    node = cluster.nodes[0]
    cluster.kube.put("pods", objs.pod(f"train-{node}", node, labels={"app": "train"}, owner_kind="Job"))
    answers = iter([True, True, False])  # leads when the call starts and at the first eviction, then not

    class Leadership:
        def is_leader(self, now: datetime) -> bool:
            return next(answers, False)

    guarded = LeaderOnlyDrainer(cluster.drainer, Leadership(), cluster.clock)
    with pytest.raises(TransientActuatorError, match=f"stopped leading during the drain of {node}"):
        guarded.drain("a", node, "d")
    assert sum(_evictions(cluster, p) for p in (f"web-{node}", f"train-{node}")) == 1
    assert cluster.drainer.draining_nodes("a") == {node: "d"}
    assert cluster.gke.calls("POST", "deleteInstances") == 0


def test_a_node_deleted_during_its_drain_ends_the_drain_without_blocking_the_pool(cluster: Cluster) -> None:
    """A preempted Spot VM, or a person deleting the node, while a disruption budget holds the drain."""
    node = cluster.nodes[0]
    cluster.kube.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=3), group="policy")
    drains = NodeDrains({"a": cluster.drainer}, timedelta(0))
    resize = Resize(pool_id="a", from_units=3, to_units=2, reason="idle", key="r1")
    started = drains.scale_down(resize, cluster.clock.now(), [node])
    assert [r.status for r in started.results] == [ActionStatus.STARTED]

    cluster.kube.delete("nodes", node)
    cluster.clock.advance(timedelta(minutes=1))
    step = drains.continue_pending(cluster.clock.now())
    assert step.permanent == {}
    assert [r.status for r in step.results] == [ActionStatus.DONE]
    assert "gone from the cluster" in step.results[0].detail
    assert drains.pending == ()
    assert cluster.gke.calls("POST", "deleteInstances") == 0  # nothing of ours to remove


def test_a_node_object_gone_as_soon_as_it_is_removed_still_ends_the_drain_done(cluster: Cluster) -> None:
    node = cluster.nodes[1]

    class RemovesTheNodeObject:
        """The Node object disappears with its instance, before the drain takes its annotation off."""

        def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult:
            removed = cluster.actuator.delete_nodes(pool_id, nodes, key)
            for name in nodes:
                cluster.kube.delete("nodes", name)
            return removed

    drainer = KubernetesNodeDrainer(cluster.api, cluster.clock, {"a": "a100"}, RemovesTheNodeObject())
    assert drainer.drain("a", node, "d").status is ActionStatus.STARTED  # its pod shuts down first
    cluster.clock.advance(timedelta(seconds=30))
    done = drainer.drain("a", node, "d")
    assert done.status is ActionStatus.DONE
    assert done.detail.startswith(f"node {node} drained")
    assert cluster.gke.calls("POST", "deleteInstances") == 1


def test_a_new_drain_of_a_node_whose_earlier_drain_was_dropped_gets_its_own_timeout(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    cluster.kube.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=3), group="policy")
    assert cluster.drainer.drain("a", node, "r1#n").status is ActionStatus.STARTED
    uncordoned = cluster.kube.get("nodes", node)  # a person uncordons it: that drain is dropped, never settled
    assert uncordoned is not None
    uncordoned["spec"]["unschedulable"] = False
    cluster.kube.put("nodes", uncordoned)
    assert cluster.drainer.draining_nodes("a") == {}

    cluster.clock.advance(timedelta(minutes=20))
    again = cluster.drainer.drain("a", node, "r2#n")
    assert again.status is ActionStatus.STARTED  # waits for the budget, not timed out by the dropped drain
    assert _cordoned(cluster, node)
    cluster.clock.advance(timedelta(minutes=15))
    assert cluster.drainer.drain("a", node, "r2#n").status is ActionStatus.FAILED  # its own timeout
