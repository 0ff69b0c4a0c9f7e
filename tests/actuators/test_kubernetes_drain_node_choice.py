"""KubernetesNodeDrainer on the fake Kubernetes API: which nodes are idle (DaemonSet and mirror pods ignored, any
accelerator the node offers or a demand class names keeps it busy) and the order a pool's nodes are released in."""

from __future__ import annotations

from datetime import timedelta

from actuators.kubernetes_drain import KubernetesNodeDrainer
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import JOB, Cluster
from tests.fakes import kube_objects as objs

cluster = rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes


def test_idleness_ignores_daemonsets_and_mirror_pods_but_not_accelerator_work(cluster: Cluster) -> None:
    busy, mirrored, _ = cluster.nodes
    cluster.kube.put("pods", objs.pod("train", busy, accelerators=8))
    cluster.kube.put("pods", objs.mirror_pod("kube-proxy", mirrored))
    cluster.drainer.idle_nodes("a", timedelta(minutes=10))
    cluster.clock.advance(timedelta(minutes=10))
    assert cluster.drainer.idle_nodes("a", timedelta(minutes=10)) == sorted(cluster.nodes[1:])
    cluster.kube.put("pods", objs.pod("train-2", mirrored, accelerators=1, resource=objs.TPU_RESOURCE))
    assert cluster.drainer.idle_nodes("a", timedelta(minutes=10)) == [cluster.nodes[2]]


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
