"""Builders for the Kubernetes objects tests seed into FakeKubeApi: nodes, pods, PodDisruptionBudgets.

They return plain JSON-shaped dicts, as the API server stores them, with every field the real client requires.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

GPU_RESOURCE = "nvidia.com/gpu"
TPU_RESOURCE = "google.com/tpu"
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"


def node(
    name: str,
    pool: str,
    *,
    accelerators: int = 8,
    resource: str = GPU_RESOURCE,
    labels: dict[str, str] | None = None,
    unschedulable: bool = False,
    instance: str | None = None,
) -> Obj:
    """A ready node of a GKE node pool. ``instance`` is the Compute Engine providerID tail (default: the name)."""
    zone = "us-central1-a"
    return {
        "metadata": {"name": name, "labels": {NODE_POOL_LABEL: pool, **(labels or {})}},
        "spec": {
            "providerID": f"gce://test-project/{zone}/{instance or name}",
            **({"unschedulable": True} if unschedulable else {}),
        },
        "status": {
            "allocatable": {resource: str(accelerators), "cpu": "96", "memory": "1000Gi"},
            "capacity": {resource: str(accelerators), "cpu": "96", "memory": "1000Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


# The API group of each built-in controller kind that owns pods (Kubernetes API: ReplicaSet, StatefulSet, DaemonSet
# in apps/v1, Job in batch/v1, ReplicationController in v1).
_OWNER_API_VERSIONS = {"Job": "batch/v1", "ReplicationController": "v1"}


def pod(
    name: str,
    node_name: str | None,
    *,
    namespace: str = "default",
    accelerators: int = 0,
    resource: str = GPU_RESOURCE,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner_kind: str | None = None,
    controller: bool = True,
    volumes: list[Obj] | None = None,
    phase: str = "Running",
) -> Obj:
    """A pod, optionally owned (``owner_kind="DaemonSet"``, ``"ReplicaSet"``, ``"Job"``...), requesting accelerators
    and with ``volumes`` (``empty_dir``, ``host_path``). Without ``owner_kind`` it is a bare pod, which nothing
    recreates. An owned pod's ownerReference is its controller's (``controller: true``, as the ReplicaSet, Job,
    StatefulSet and DaemonSet controllers write it; ``ObjectMeta.ownerReferences`` in the Kubernetes API):
    ``controller=False`` builds an owner that only garbage-collects the pod."""
    requests = {resource: str(accelerators)} if accelerators else {}
    meta: Obj = {"name": name, "namespace": namespace, "labels": labels or {}, "annotations": annotations or {}}
    if owner_kind is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": _OWNER_API_VERSIONS.get(owner_kind, "apps/v1"),
                "kind": owner_kind,
                "name": f"{name}-owner",
                "uid": f"uid-{name}-owner",
                "controller": controller,
                "blockOwnerDeletion": controller,
            }
        ]
    spec: Obj = {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}]}
    if volumes:
        spec["volumes"] = volumes
        mounts = [{"name": v["name"], "mountPath": f"/mnt/{v['name']}"} for v in volumes]
        spec["containers"][0]["volumeMounts"] = mounts
    if node_name is not None:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def empty_dir(name: str, medium: str | None = None) -> Obj:
    """An emptyDir volume: on the node's disk, or in memory (tmpfs) with ``medium="Memory"``."""
    return {"name": name, "emptyDir": {"medium": medium} if medium else {}}


def host_path(name: str, path: str = "/var/cache/models") -> Obj:
    """A hostPath volume: a directory of the node."""
    return {"name": name, "hostPath": {"path": path}}


def mirror_pod(name: str, node_name: str, namespace: str = "kube-system") -> Obj:
    """A static pod's mirror: the kubelet marks it with the config.mirror annotation; it cannot be evicted."""
    return pod(name, node_name, namespace=namespace, annotations={"kubernetes.io/config.mirror": "hash"})


def pdb(
    name: str,
    match_labels: dict[str, str],
    *,
    namespace: str = "default",
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    expected_pods: int | None = None,
) -> Obj:
    """A PodDisruptionBudget; ``expected_pods`` stands for the owning controller's replica count."""
    spec: Obj = {"selector": {"matchLabels": match_labels}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    status = {"expectedPods": expected_pods} if expected_pods is not None else {}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": status}
