"""KubernetesNodeDrainer on the fake Kubernetes API, removing nodes through GkeNodePoolActuator on the fake GKE and
Compute Engine APIs: disruption budgets respected (429 waits, never force), evicted pods waited for until they
have shut down, annotations and misconfigured budgets honoured, pods nothing recreates or with local storage left
alone, timeouts uncordon, and only the drained node is removed."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from agent.executor import execute
from agent.planning import PlannerMemory
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import (
    AcceleratorFamily,
    ActionResult,
    ActionStatus,
    CapacityPlan,
    CapacityTier,
    PermanentActuatorError,
    PoolKind,
    PoolSpec,
    Resize,
    TransientActuatorError,
)
from models.clock import SimulatedClock
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi, RequestRecord

CLUSTER = "projects/test-project/locations/us-central1/clusters/ml"


@dataclass
class Cluster:
    kube: FakeKubeApi
    gke: FakeGkeApi
    drainer: KubernetesNodeDrainer
    clock: SimulatedClock
    nodes: list[str]
    api: KubernetesApi
    actuator: GkeNodePoolActuator

    def instances(self) -> list[tuple[str, str]]:
        return [(i.name, i.action) for m in self.gke.pools["a100"].migs for i in m.instances]


@pytest.fixture
def cluster(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi) -> Cluster:
    gke_api.add_pool("a100", nodes=3)
    nodes = [i.name for m in gke_api.pools["a100"].migs for i in m.instances]
    for name in nodes:
        kube_api.put("nodes", objs.node(name, "a100"))
        kube_api.put("pods", objs.pod(f"logs-{name}", name, namespace="kube-system", owner_kind="DaemonSet"))
        kube_api.put("pods", objs.pod(f"web-{name}", name, labels={"app": "web"}, owner_kind="ReplicaSet"))
    clients = google_clients(gke_api.url)
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now  # evicted pods finish terminating as the test's clock passes their grace period
    actuator = GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [NodePoolMapping(pool="a", node_pool="a100")], clock
    )
    api = KubernetesApi(kube_client)
    drainer = KubernetesNodeDrainer(api, clock, {"a": "a100"}, actuator, timedelta(minutes=15))
    return Cluster(kube_api, gke_api, drainer, clock, nodes, api, actuator)


def _cordoned(c: Cluster, node: str) -> bool:
    found = c.kube.get("nodes", node)
    assert found is not None
    return bool(found["spec"].get("unschedulable"))


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


SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
NO_CONTROLLER = "no controller recreates it"
SCRATCH_LOST = "local storage emptyDir 'scratch' would be lost"
JOB: dict[str, Any] = {"owner_kind": "Job"}


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"annotations": {SAFE_TO_EVICT: "false"}, **JOB}, f'annotated {SAFE_TO_EVICT}: "false"'),
        (
            {"annotations": {"karpenter.sh/do-not-disrupt": "true"}, **JOB},
            'annotated karpenter.sh/do-not-disrupt: "true"',
        ),
        (  # safe-to-evict "true" lets a bare pod go, not one that must not be disrupted
            {"annotations": {SAFE_TO_EVICT: "true", "karpenter.sh/do-not-disrupt": "true"}},
            'annotated karpenter.sh/do-not-disrupt: "true"',
        ),
        ({}, NO_CONTROLLER),  # a bare pod: evicting it deletes it for good
        ({"phase": "Pending"}, NO_CONTROLLER),  # bound to the node, not started yet: deleted all the same
        ({"owner_kind": "ReplicaSet", "controller": False}, NO_CONTROLLER),  # an owner that only garbage-collects it
        ({"volumes": [objs.empty_dir("scratch")], **JOB}, SCRATCH_LOST),
        ({"volumes": [objs.host_path("models")], **JOB}, "local storage hostPath 'models' would be lost"),
        (
            {
                "volumes": [objs.empty_dir("scratch"), objs.host_path("models")],
                "annotations": {LOCAL_VOLUMES: "models"},
            },
            f"{NO_CONTROLLER}, {SCRATCH_LOST}",  # only the volume the annotation names is spared
        ),
    ],
    ids=[
        "safe-to-evict-false",
        "do-not-disrupt",
        "do-not-disrupt-over-safe-to-evict",
        "bare",
        "bare-pending",
        "owner-not-controller",
        "empty-dir",
        "host-path",
        "local-volume-not-listed",
    ],
)
def test_pods_that_must_not_be_disrupted_block_the_drain(cluster: Cluster, options: dict[str, Any], why: str) -> None:
    node = cluster.nodes[2]
    cluster.kube.put("pods", objs.pod("precious", node, **options))
    result = cluster.drainer.drain("a", node, "d")
    assert result.status is ActionStatus.REJECTED
    assert result.detail == f"pods that must not be disrupted: default/precious ({why}); node {node} uncordoned"
    assert not _cordoned(cluster, node)
    assert cluster.kube.calls("create", "pods", "eviction") == 0
    assert cluster.kube.get("pods", "precious", "default") is not None
    assert cluster.gke.calls("POST", "deleteInstances") == 0


@pytest.mark.parametrize(
    "options",
    [
        {"annotations": {SAFE_TO_EVICT: "true"}},  # a bare pod its owner lets go
        {"annotations": {SAFE_TO_EVICT: "true"}, "volumes": [objs.empty_dir("scratch"), objs.host_path("models")]},
        {
            "annotations": {LOCAL_VOLUMES: "scratch, models"},
            "volumes": [objs.empty_dir("scratch"), objs.host_path("models")],
            **JOB,
        },
        {"volumes": [objs.empty_dir("shm", medium="Memory")], **JOB},  # tmpfs: not local storage
        {"owner_kind": "StatefulSet", "phase": "Pending"},
    ],
    ids=["bare-safe-to-evict", "local-storage-safe-to-evict", "local-volumes-listed", "memory-empty-dir", "pending"],
)
def test_pods_their_owners_let_go_are_evicted(cluster: Cluster, options: dict[str, Any]) -> None:
    node = cluster.nodes[0]
    cluster.kube.put("pods", objs.pod("scratchy", node, accelerators=8, **options))
    assert cluster.drainer.drain("a", node, "d", forced=True).status is ActionStatus.STARTED  # busy: forced
    assert _evictions(cluster, "scratchy") == 1
    cluster.clock.advance(timedelta(seconds=30))
    assert cluster.drainer.drain("a", node, "d").status is ActionStatus.DONE
    assert cluster.kube.get("pods", "scratchy", "default") is None
    assert cluster.gke.calls("POST", "deleteInstances") == 1


def test_idleness_ignores_daemonsets_and_mirror_pods_but_not_accelerator_work(cluster: Cluster) -> None:
    busy, mirrored, _ = cluster.nodes
    cluster.kube.put("pods", objs.pod("train", busy, accelerators=8))
    cluster.kube.put("pods", objs.mirror_pod("kube-proxy", mirrored))
    cluster.drainer.idle_nodes("a", timedelta(minutes=10))
    cluster.clock.advance(timedelta(minutes=10))
    assert cluster.drainer.idle_nodes("a", timedelta(minutes=10)) == sorted(cluster.nodes[1:])
    cluster.kube.put("pods", objs.pod("train-2", mirrored, accelerators=1, resource=objs.TPU_RESOURCE))
    assert cluster.drainer.idle_nodes("a", timedelta(minutes=10)) == [cluster.nodes[2]]


def test_the_drainer_uses_only_the_api_calls_its_rbac_role_grants(cluster: Cluster) -> None:
    cluster.drainer.idle_nodes("a", timedelta(0))
    cluster.drainer.drain("a", cluster.nodes[0], "d")
    used = {(r.verb, r.api_group, r.resource, r.subresource) for r in cluster.kube.requests}
    assert used <= {
        ("list", "", "nodes", ""),
        ("patch", "", "nodes", ""),
        ("list", "", "pods", ""),
        ("create", "", "pods", "eviction"),
    }
    assert (
        RequestRecord("create", "", "pods", "eviction", "default", f"web-{cluster.nodes[0]}") in cluster.kube.requests
    )


def test_pool_nodes_put_idle_nodes_first_then_the_busy_ones_cheapest_to_lose_first(cluster: Cluster) -> None:
    two_pods, one_big_pod, first_idle = cluster.nodes
    for name in ("a-held", "a-light", "a-later-idle", "a-cordoned"):
        cluster.kube.put("nodes", objs.node(name, "a100", unschedulable=name == "a-cordoned"))
    cluster.kube.put("pods", objs.pod("train-1", two_pods, accelerators=1, **JOB))
    cluster.kube.put("pods", objs.pod("train-2", two_pods, accelerators=1, **JOB))
    cluster.kube.put("pods", objs.pod("train-3", one_big_pod, accelerators=8, **JOB))
    cluster.kube.put("pods", objs.pod("train-4", "a-light", accelerators=1, resource=objs.TPU_RESOURCE, **JOB))
    cluster.kube.put("pods", objs.pod("train-5", "a-held", accelerators=1, **JOB))  # least work, but must stay
    guard = {"karpenter.sh/do-not-disrupt": "true"}
    cluster.kube.put("pods", objs.pod("precious", "a-held", annotations=guard, owner_kind="ReplicaSet"))
    cluster.kube.put("pods", objs.pod("train-6", "a-later-idle", accelerators=2, **JOB))
    busy = ["a-light", "a-later-idle", one_big_pod, two_pods, "a-held"]  # by pods, then accelerators, then name
    assert cluster.drainer.pool_nodes("a") == [first_idle, *busy]

    cluster.clock.advance(timedelta(minutes=1))
    cluster.kube.delete("pods", "train-6", "default")  # idle from now: after the node idle for a minute
    order = [first_idle, "a-later-idle", "a-light", one_big_pod, two_pods, "a-held"]
    assert cluster.drainer.pool_nodes("a") == order
    assert cluster.drainer.idle_nodes("a", timedelta(0)) == order[:2]
    assert cluster.drainer.idle_nodes("a", timedelta(minutes=1)) == order[:1]


def test_a_forced_release_takes_nodes_whose_pods_would_be_lost_last(cluster: Cluster) -> None:
    """Draining a node with a bare pod or a pod's local storage would be rejected: such nodes come after every busy
    node that can be drained, however little work they hold."""
    bare, scratch, loaded = cluster.nodes
    cluster.kube.put("pods", objs.pod("train-bare", bare, accelerators=1))
    cluster.kube.put(
        "pods", objs.pod("train-scratch", scratch, accelerators=1, volumes=[objs.empty_dir("ckpt")], **JOB)
    )
    cluster.kube.put("pods", objs.pod("train-1", loaded, accelerators=8, **JOB))
    cluster.kube.put(
        "pods", objs.pod("train-2", loaded, accelerators=8, volumes=[objs.empty_dir("shm", "Memory")], **JOB)
    )
    assert cluster.drainer.pool_nodes("a") == [loaded, bare, scratch]


def _pod(name: str, node: str, grace: int | None = None, **options: Any) -> dict[str, Any]:
    pod = objs.pod(name, node, **options)
    if grace is not None:
        pod["spec"]["terminationGracePeriodSeconds"] = grace
    return pod


def _evictions(c: Cluster, pod: str) -> int:
    return sum(1 for r in c.kube.requests if (r.verb, r.subresource, r.name) == ("create", "eviction", pod))


def test_a_node_is_removed_only_once_its_evicted_pods_have_shut_down(cluster: Cluster) -> None:
    node = cluster.nodes[1]
    cluster.kube.put("pods", _pod("train", node, grace=120, accelerators=8, owner_kind="Job"))  # checkpoints

    first = cluster.drainer.drain("a", node, "d", forced=True)  # a busy node: a forced release's drain
    assert first.status is ActionStatus.STARTED
    assert "('default', 'train')" in first.detail and "to finish terminating" in first.detail
    terminating = cluster.kube.get("pods", "train", "default")
    assert terminating is not None  # SIGTERM sent: the pod saves its work while the node stays
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 120
    assert cluster.kube.get("pods", f"web-{node}", "default") is not None  # 30 s by default
    assert cluster.gke.calls("POST", "deleteInstances") == 0

    cluster.clock.advance(timedelta(seconds=60))
    waiting = cluster.drainer.drain("a", node, "d")
    assert waiting.status is ActionStatus.STARTED
    assert cluster.kube.get("pods", f"web-{node}", "default") is None
    assert (_evictions(cluster, "train"), _evictions(cluster, f"web-{node}")) == (1, 1)  # waited for, not re-evicted
    assert cluster.gke.calls("POST", "deleteInstances") == 0 and _cordoned(cluster, node)

    cluster.clock.advance(timedelta(seconds=60))
    done = cluster.drainer.drain("a", node, "d")
    assert done.status is ActionStatus.DONE
    assert done.detail.startswith(f"node {node} drained")
    assert cluster.gke.calls("POST", "deleteInstances") == 1
    assert cluster.kube.calls("delete", "pods") == 0


def test_a_pod_already_terminating_is_waited_for_and_never_evicted(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    leaving = _pod("leaving", node, grace=300, annotations={"karpenter.sh/do-not-disrupt": "true"})
    leaving["metadata"].update(deletionTimestamp="2024-05-01T00:05:00Z", deletionGracePeriodSeconds=300)
    cluster.kube.put("pods", leaving)  # deleted by someone else before the drain: going anyway, so no blocker

    result = cluster.drainer.drain("a", node, "d")
    assert result.status is ActionStatus.STARTED
    assert _evictions(cluster, "leaving") == 0
    cluster.clock.advance(timedelta(minutes=5))
    assert cluster.drainer.drain("a", node, "d").status is ActionStatus.DONE
    assert _evictions(cluster, "leaving") == 0


def test_pods_a_lost_kubelet_never_finishes_do_not_hold_the_node_past_the_timeout(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    node = cluster.nodes[2]
    cluster.kube.stop_kubelet(node)
    assert cluster.drainer.drain("a", node, "d").status is ActionStatus.STARTED
    cluster.clock.advance(timedelta(minutes=14))
    still = cluster.drainer.drain("a", node, "d")
    assert still.status is ActionStatus.STARTED and "to finish terminating" in still.detail
    assert cluster.gke.calls("POST", "deleteInstances") == 0

    caplog.set_level(logging.WARNING, logger="actuators.kubernetes_drain")
    cluster.clock.advance(timedelta(minutes=1))
    removed = cluster.drainer.drain("a", node, "d")
    assert removed.status is ActionStatus.DONE
    assert f"[('default', 'web-{node}')] still terminating after 0:15:00" in removed.detail
    assert cluster.gke.calls("POST", "deleteInstances") == 1
    assert cluster.kube.get("pods", f"web-{node}", "default") is not None  # never deleted by force
    assert any("still terminating" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_a_pod_within_its_grace_period_is_waited_for_past_the_timeout(cluster: Cluster) -> None:
    node = cluster.nodes[2]
    cluster.kube.put("pods", _pod("train", node, grace=20 * 60, accelerators=8, **JOB))  # a long checkpoint
    assert cluster.drainer.drain("a", node, "d", forced=True).status is ActionStatus.STARTED
    cluster.clock.advance(timedelta(minutes=15))
    past_timeout = cluster.drainer.drain("a", node, "d")
    assert past_timeout.status is ActionStatus.STARTED  # neither cut off nor uncordoned
    assert _cordoned(cluster, node) and cluster.gke.calls("POST", "deleteInstances") == 0
    cluster.clock.advance(timedelta(minutes=5))
    assert cluster.drainer.drain("a", node, "d").status is ActionStatus.DONE


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
    assert f"evicting ('default', 'web-{node}') still fails after 0:15:00" in gave_up.detail
    assert not _cordoned(cluster, node)
    assert cluster.gke.calls("POST", "deleteInstances") == 0


def test_an_eviction_refused_for_good_uncordons_the_node(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    cluster.kube.fail_next(1, 403, verb="create", resource="pods")  # RBAC refuses the eviction
    with pytest.raises(PermanentActuatorError):
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


def test_pods_requesting_any_accelerator_the_node_offers_keep_it_busy(cluster: Cluster) -> None:
    """A MIG profile or a shared GPU is an extended resource like ``nvidia.com/gpu``: its pods are accelerator work.
    Kubernetes' own resources are not."""
    mig = "nvidia.com/mig-3g.40gb"
    cluster.kube.put("nodes", objs.node("a-mig", "a100", resource=mig, accelerators=2))
    cluster.kube.put("pods", objs.pod("train-mig", "a-mig", accelerators=1, resource=mig, owner_kind="Job"))
    plain = objs.node("a-plain", "a100")
    plain["status"]["capacity"] |= {"hugepages-2Mi": "1Gi", "ephemeral-storage": "100Gi", "pods": "110"}
    cluster.kube.put("nodes", plain)
    cpu_only = objs.pod("web-plain", "a-plain", owner_kind="ReplicaSet")
    cpu_only["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "2", "memory": "1Gi", "hugepages-2Mi": "1Gi"}
    cluster.kube.put("pods", cpu_only)

    idle = cluster.drainer.idle_nodes("a", timedelta(0))
    assert "a-mig" not in idle
    assert "a-plain" in idle
    assert cluster.drainer.pool_nodes("a")[-1] == "a-mig"  # the only busy node


def test_a_demand_class_resource_keeps_a_node_busy_even_if_the_node_does_not_list_it(cluster: Cluster) -> None:
    shared = "nvidia.com/gpu.shared"
    node = cluster.nodes[0]
    cluster.kube.put("pods", objs.pod("infer", node, accelerators=1, resource=shared, owner_kind="ReplicaSet"))
    assert node in cluster.drainer.idle_nodes("a", timedelta(0))  # the node advertises only nvidia.com/gpu

    configured = KubernetesNodeDrainer(
        cluster.api, cluster.clock, {"a": "a100"}, cluster.actuator, accelerator_resources=[shared]
    )
    assert configured.idle_nodes("a", timedelta(0)) == sorted(cluster.nodes[1:])


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


def _grow(c: Cluster, count: int) -> list[str]:
    """``count`` more nodes of the pool, each running a web pod (nodes the Kubernetes API lists by the pool label)."""
    added = [f"extra-{len(c.nodes) + i}" for i in range(count)]
    for name in added:
        c.kube.put("nodes", objs.node(name, "a100"))
        c.kube.put("pods", objs.pod(f"web-{name}", name, labels={"app": "web"}, owner_kind="ReplicaSet"))
    c.nodes.extend(added)
    return added


def test_a_survey_lists_the_pods_of_a_large_pool_once_and_of_a_small_one_per_node(cluster: Cluster) -> None:
    """3 nodes: one list each; 12 and then 24: one list of the cluster's pods, grouped by node, where it was one list
    per node; pods on another pool's node or finished ones do not count."""
    before = cluster.kube.calls("list", "pods")
    assert cluster.drainer.idle_nodes("a", timedelta(0)) == sorted(cluster.nodes)
    assert cluster.kube.calls("list", "pods") - before == 3

    _grow(cluster, 9)
    cluster.kube.put("nodes", objs.node("gke-ml-cpu-0", "cpu"))
    cluster.kube.put("pods", objs.pod("train-other", "gke-ml-cpu-0", accelerators=8, owner_kind="Job"))
    cluster.kube.put("pods", objs.pod("train-done", "extra-5", accelerators=8, owner_kind="Job", phase="Succeeded"))
    cluster.kube.put("pods", objs.pod("train", "extra-7", accelerators=8, owner_kind="Job"))
    for size in (12, 24):
        before = cluster.kube.calls("list", "pods")
        idle = cluster.drainer.idle_nodes("a", timedelta(0))
        assert cluster.kube.calls("list", "pods") - before == 1
        assert len(cluster.nodes) == size
        assert set(idle) == set(cluster.nodes) - {"extra-7"}
        _grow(cluster, 12)


def test_the_pods_of_many_nodes_are_read_in_pages(cluster: Cluster) -> None:
    """One list in pages of the cluster's unfinished pods bound to a node: the same pods as one list per node."""
    cluster.kube.put("pods", objs.pod("done", cluster.nodes[1], owner_kind="Job", phase="Failed"))
    cluster.kube.put("pods", objs.pod("pending", None, owner_kind="Job"))
    before = cluster.kube.calls("list", "pods")
    by_node = cluster.api.pods.on_nodes([*cluster.nodes, "gone"], page_size=2)
    assert cluster.kube.calls("list", "pods") - before == 3  # 6 pods bound to a node and not finished, 2 a page
    one_by_one = {node: cluster.api.pods.on_node(node) for node in cluster.nodes}
    assert {node: sorted(p.metadata.name for p in pods) for node, pods in by_node.items()} == {
        **{
            node: sorted(p.metadata.name for p in pods if p.status.phase != "Failed")
            for node, pods in one_by_one.items()
        },
        "gone": [],
    }
    assert by_node[cluster.nodes[0]][0].metadata.owner_references[0].kind in ("DaemonSet", "ReplicaSet")


def _gpu_pool(pool_id: str) -> PoolSpec:
    return PoolSpec(pool_id, PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 24.0,
                    timedelta(minutes=10), ("a",))  # fmt: skip


def test_a_tick_over_five_pools_of_eight_nodes_lists_the_clusters_pods_once(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """5 pools of 8 nodes, one idle node released from each: the observation of every pool and the executor's idle
    re-checks share one list of the cluster's pods, where each made its own (10 lists of every pod in the cluster);
    each drain of one node lists that node's pods after cordoning it and after evicting them. The next tick lists
    them once again, and its drain steps, the nodes cordoned, list each node's pods. Only the very first tick lists
    them once per pool, as it learns which nodes to keep from a list."""
    pools = {f"pool-{i}": f"gpu-{i}" for i in range(5)}
    for node_pool in pools.values():
        gke_api.add_pool(node_pool, nodes=8)
        for i, instance in enumerate(i.name for m in gke_api.pools[node_pool].migs for i in m.instances):
            kube_api.put("nodes", objs.node(instance, node_pool))
            kube_api.put("pods", objs.pod(f"web-{instance}", instance, labels={"app": "web"}, owner_kind="ReplicaSet"))
            if i:  # the first node of each pool is idle, the others train
                kube_api.put("pods", objs.pod(f"train-{instance}", instance, accelerators=8, **JOB))
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now
    clients = google_clients(gke_api.url)
    mappings = [NodePoolMapping(pool=pool, node_pool=node_pool) for pool, node_pool in pools.items()]
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, mappings, clock)
    drainer = KubernetesNodeDrainer(KubernetesApi(kube_client), clock, pools, actuator, timedelta(minutes=15))
    drains = NodeDrains(dict.fromkeys(pools, drainer), timedelta(minutes=10))
    specs = {pool: _gpu_pool(pool) for pool in pools}
    memory = PlannerMemory()

    def tick(release: bool) -> tuple[int, list[ActionStatus]]:
        nonlocal memory
        before = kube_api.calls("list", "pods")
        now = clock.now()
        seen, _ = drains.observe({s.pool_id: s for s in actuator.list_pools()}, now)
        resizes = tuple(Resize(pool, 8, 7, "idle", f"{pool}@{now.isoformat()}->7") for pool in pools if release)
        done = execute(CapacityPlan(now, resizes), actuator, specs, memory, now, drains)
        memory = done.memory
        assert all(seen[pool].idle_units == 1 for pool in pools) or not release
        return kube_api.calls("list", "pods") - before, [r.status for r in done.results]

    assert tick(release=False)[0] == 5  # the first observation learns each pool's nodes: one list per pool
    clock.advance(timedelta(minutes=10))
    lists, statuses = tick(release=True)
    assert statuses == [ActionStatus.STARTED] * 5  # the evicted web pods are terminating
    assert lists == 1 + 5 * 2
    clock.advance(timedelta(minutes=1))
    lists, statuses = tick(release=False)
    assert statuses == [ActionStatus.DONE] * 5  # their grace period is over: each node empty and removed
    assert lists == 1 + 5


def test_a_list_of_the_clusters_pods_is_shared_for_seconds_and_not_for_a_node_after_an_eviction(
    cluster: Cluster,
) -> None:
    pods, nodes = cluster.api.pods, cluster.nodes

    def lists() -> int:
        return cluster.kube.calls("list", "pods")

    def names(by_node: dict[str, list[k8s.V1Pod]], node: str) -> list[str]:
        return sorted(p.metadata.name for p in by_node[node])

    pods.on_nodes(nodes, now=100.0)
    cluster.kube.put("pods", objs.pod("late", nodes[0], owner_kind="Job"))
    before = lists()
    shared = pods.on_nodes(nodes[:2], now=105.0)
    assert lists() == before and "late" not in names(shared, nodes[0])  # the list read 5 s before
    pods.evict(f"web-{nodes[1]}", "default")
    after = pods.on_nodes(nodes[:2], now=105.0)  # its node is no longer answered for: read again
    assert lists() == before + 1 and "late" in names(after, nodes[0])
    [web] = [p for p in after[nodes[1]] if p.metadata.name == f"web-{nodes[1]}"]
    assert web.metadata.deletion_timestamp is not None  # terminating, as the drain must see it
    asked_again: list[tuple[list[str], float | None, bool]] = [
        (nodes, 115.0, False),  # 10 s on: read again
        (nodes, 115.0, True),
        ([*nodes, "gke-new"], 115.0, False),  # a node the list does not hold
        (nodes, None, False),  # no time: read, not shared
    ]
    for asked, now, fresh in asked_again:
        before = lists()
        pods.on_nodes(asked, now=now, fresh=fresh)
        assert lists() == before + 1
