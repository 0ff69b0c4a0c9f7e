"""Which pods a drain has to move, which are accelerator work, and which must not be disrupted: rules about pods
that do not depend on how a drain goes (``actuators.kubernetes_drain`` applies them).

A pod must not be disrupted when it is annotated ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`` or
``karpenter.sh/do-not-disrupt: "true"``, or when its eviction would destroy it or its data for good, by the rules
cluster-autoscaler applies before it removes a node (kubernetes/autoscaler ``cluster-autoscaler/utils/drain/
drain.go``, ``simulator/drainability/rules/`` ``replicated``, ``localstorage`` and ``safetoevict``; its FAQ, "What
types of pods can prevent CA from removing a node?") and ``kubectl drain`` enforces unless given ``--force`` or
``--delete-emptydir-data`` (kubernetes/kubectl ``pkg/drain/filters.go``, ``unreplicatedFilter``,
``localStorageFilter``):

* a pod no controller recreates: none of its ownerReferences has ``controller: true`` (a bare pod, or one whose
  owners only garbage-collect it); evicting it deletes it. Any controller kind will do, as for kubectl: a Job (a
  controller: it makes a new pod for the evicted one, so the work goes back to the queue as on any busy node), a
  ReplicaSet, a StatefulSet, or a custom one (a training operator's job, a RayCluster), which recreates its pods
  too. cluster-autoscaler's default (``--skip-nodes-with-custom-controller-pods=true``) blocks custom controllers'
  pods as well, but on accelerator nodes most work is run by such controllers. Whether the controller object still
  exists is not read.
* a pod with local storage that the node's removal loses: a ``hostPath`` volume, or an ``emptyDir`` not backed by
  memory (cluster-autoscaler's ``isLocalVolume``: ``medium: Memory`` is how training pods get a large ``/dev/shm``,
  which holds nothing meant to outlive the pod; kubectl counts every emptyDir and no hostPath), unless the pod's
  ``cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes`` (a comma list of volume names; spaces around a
  name are ignored) names the volume.

``cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`` lifts both rules, as for cluster-autoscaler (it does not
lift the two blocking annotations). A pod in phase Pending on the node counts like a running one, as for both tools:
a bare one is deleted all the same, and its init containers may have filled its emptyDir already. Finished pods,
DaemonSet pods and mirror pods are not counted at all; a pod already terminating is going anyway, so it blocks
nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the kubernetes client is not imported with the rules (the CLI reads their words without it)
    from kube.models import V1Container, V1Node, V1Pod

# Always accelerators; so is every extended resource a node advertises (a MIG profile such as
# ``nvidia.com/mig-3g.40gb``, ``nvidia.com/gpu.shared``, ``amd.com/gpu``) and every resource a demand class names.
ACCELERATOR_RESOURCES = ("nvidia.com/gpu", "google.com/tpu")
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
_BLOCKING_ANNOTATIONS = {SAFE_TO_EVICT: "false", DO_NOT_DISRUPT: "true"}
# The words ``must_stay`` gives for a pod no controller recreates and for its local storage (the warning about a
# held idle node picks its advice by them: ``agent.drain_records``).
NO_CONTROLLER = "no controller recreates it"
LOCAL_STORAGE = "local storage"
# How long past a terminating pod's grace period, counted by this agent's clock from when it first saw the pod left on a
# node whose kubelet is gone, the pod is taken as abandoned (``abandoned``).
ABANDONED_AFTER = timedelta(minutes=1)
# How long past a terminating pod's grace period, counted by this agent's clock from when it first saw the pod
# terminating on any node, the pod is taken as stuck (``stuck``): its kubelet kills its containers at the grace
# period's end and then deletes it, in seconds; one still listed this long after is not going to finish.
STUCK_AFTER = timedelta(minutes=2)


def pod_name(pod: V1Pod) -> tuple[str, str]:
    return (pod.metadata.namespace, pod.metadata.name)


def counts(pod: V1Pod) -> bool:
    """Pods a drain has to move: not DaemonSet-owned, not a static pod's mirror, not finished."""
    owners = pod.metadata.owner_references or []
    if any(o.kind == "DaemonSet" for o in owners):
        return False
    if "kubernetes.io/config.mirror" in (pod.metadata.annotations or {}):
        return False
    return (pod.status.phase if pod.status else None) not in ("Succeeded", "Failed")


def terminating(pod: V1Pod) -> bool:
    """Deleted (evicted) and not yet gone: its containers are shutting down within its grace period."""
    return pod.metadata.deletion_timestamp is not None


def left_behind(pod: V1Pod, node: V1Node) -> bool:
    """Terminating on a node whose kubelet is gone (``kubelet_gone``): no one may be there to finish it."""
    return terminating(pod) and kubelet_gone(node)


def abandoned(pod: V1Pod, node: V1Node, seen_for: timedelta) -> bool:
    """Left behind (``left_behind``) and seen so, by this agent's clock, for longer than its grace period
    (``metadata.deletionGracePeriodSeconds``) plus ``ABANDONED_AFTER``: left Terminating by a kubelet that is gone and
    never finishes it; the API server keeps such a pod until PodGC removes it, which it does only once the node is
    deleted or tainted out-of-service. The wait is counted from when the agent first saw the pod so (``seen_for``),
    never from its ``deletionTimestamp``, which the API server's clock wrote: the pod was deleted before it was
    seen terminating, so a kubelet merely cut off from the API server has finished it by then, however far the two
    clocks are apart. A node whose kubelet is alive (``Ready`` True, or False: it reports the node not ready, a
    container runtime, network plugin or GPU driver at fault) finishes its pods: one still listed is still shutting
    down (a checkpoint on SIGTERM)."""
    grace = timedelta(seconds=pod.metadata.deletion_grace_period_seconds or 0)
    return left_behind(pod, node) and seen_for >= grace + ABANDONED_AFTER


def stuck(pod: V1Pod, seen_for: timedelta) -> bool:
    """Terminating and seen so, by this agent's clock, for longer than its grace period
    (``metadata.deletionGracePeriodSeconds``) plus ``STUCK_AFTER``, on any node: its kubelet, alive or not, has not
    finished it (a container stuck in the kernel, in a GPU driver after an Xid error or on a hung NFS mount; a
    container runtime that is down) and is not going to. The kubelet sends SIGKILL at the grace period's end, so a
    pod past it by that much is not shutting down any more. Like ``abandoned``, the wait is counted from when the
    agent first saw the pod terminating (``seen_for``), never from its ``deletionTimestamp``: the pod was deleted
    before that, so the wait is at least as long by the API server's clock too, whatever the two clocks' skew."""
    grace = timedelta(seconds=pod.metadata.deletion_grace_period_seconds or 0)
    return terminating(pod) and seen_for >= grace + STUCK_AFTER


def kubelet_gone(node: V1Node) -> bool:
    """The node's kubelet does not report it: its ``Ready`` condition is Unknown (the node lifecycle controller's
    mark once the kubelet has not posted the node's status for its ``node-monitor-grace-period``) or missing. A
    kubelet that reports the node not ready (``Ready`` False) is alive, and finishes its pods."""
    conditions = (node.status.conditions if node.status else None) or []
    return all(c.status == "Unknown" for c in conditions if c.type == "Ready")


def extended_resources(node: V1Node) -> frozenset[str]:
    """The extended resources the node advertises (device plugins': GPUs, MIG profiles, shared GPUs, TPUs...).
    Kubernetes' own resources are not: a name without a "/" (cpu, memory, ephemeral-storage, pods, hugepages-*)
    or in the kubernetes.io domain (``IsExtendedResourceName`` and ``IsNativeResource`` in kubernetes
    pkg/apis/core/v1/helper/helpers.go; https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/
    #extended-resources)."""
    status = node.status
    advertised = {**(status.capacity or {}), **(status.allocatable or {})} if status else {}
    return frozenset(r for r in advertised if "/" in r and "kubernetes.io/" not in r)


def needs_accelerator(pod: V1Pod, resources: frozenset[str]) -> bool:
    """The pod asks for one of these accelerator resources (in any container, an init container or a sidecar:
    ``_reserved``), or for devices through Dynamic Resource Allocation (``claims_devices``)."""
    return claims_devices(pod) or any(_reserved(pod, resources).values())


def claims_devices(pod: V1Pod) -> bool:
    """The pod gets devices through Dynamic Resource Allocation: it lists ``spec.resourceClaims`` (which its
    containers use through ``resources.claims``). A node whose GPUs a DRA driver manages advertises them as
    ResourceSlices, not as an extended resource, so such a pod asks for no ``nvidia.com/gpu`` at all. Which devices
    a claim allocates is in the ResourceClaim (its DeviceClass), not in the pod; any claim is taken as accelerator
    work, so a node running a pod that claims another kind of device (a NIC) is not idle either: conservative, it
    only keeps a unit longer."""
    spec = pod.spec
    containers = [*(spec.containers or []), *(spec.init_containers or [])]
    return bool(spec.resource_claims) or any(c.resources and c.resources.claims for c in containers)


def accelerator_work(pod: V1Pod, resources: frozenset[str]) -> bool:
    """A pod that keeps its node from being idle: one a drain has to move (``counts``) that asks for one of these
    accelerator resources (``needs_accelerator``)."""
    return counts(pod) and needs_accelerator(pod, resources)


def accelerators(pod: V1Pod, resources: frozenset[str]) -> int:
    """Accelerators the pod asks for, as the scheduler reserves them (``_reserved``); an amount that is not a whole
    number (extended resources are integers, so only a malformed one) counts as one, and so does each resource claim
    (``claims_devices``: how many devices it allocates is not in the pod)."""
    return len(pod.spec.resource_claims or []) + sum(_reserved(pod, resources).values())


def _reserved(pod: V1Pod, resources: frozenset[str]) -> dict[str, int]:
    """Per accelerator resource (of ``resources``), what the scheduler reserves for the pod (``PodRequests`` in
    kubernetes component-helpers ``resource/helpers.go``; "Init Containers" and "Sidecar Containers" in the
    Kubernetes docs): init containers run one at a time before the app containers, and a sidecar (an init container
    with ``restartPolicy: Always``) keeps running beside every container started after it, so the largest of the app
    containers' sum plus every sidecar's and of each init container's request plus those of the sidecars listed
    before it. A pod whose GPUs are in a sidecar (an inference server's), or one whose init container holds them,
    keeps them busy, in its init phase too. The demand query (``pod_effective_requests``), which cannot read the
    containers' order, counts sidecars' sum plus the larger of the app containers' sum and the biggest run-once init
    request: the same wherever the sidecars come before the largest run-once container, as they usually do. A
    container's amount is its request, or its limit where no request is given."""
    spec = pod.spec
    reserved = {}
    for resource in resources:
        app = sum(_amount(container, resource) for container in spec.containers or [])
        sidecars, init = 0, 0
        for container in spec.init_containers or []:
            amount = _amount(container, resource)
            if container.restart_policy == "Always":
                sidecars += amount
                init = max(init, sidecars)
            else:
                init = max(init, sidecars + amount)
        reserved[resource] = max(app + sidecars, init)
    return reserved


def _amount(container: V1Container, resource: str) -> int:
    """The container's request for ``resource`` (its limit stands for a missing request); a malformed amount is 1."""
    requests = (container.resources.requests if container.resources else None) or {}
    limits = (container.resources.limits if container.resources else None) or {}
    amount = str({**limits, **requests}.get(resource, "0"))
    if amount in ("0", ""):
        return 0
    try:
        return max(0, int(amount))
    except ValueError:
        return 1


def must_stay(pod: V1Pod) -> list[str]:
    """Why the pod must not be evicted (see the module's docstring); empty when it may be, or is terminating."""
    if terminating(pod):
        return []
    annotations = pod.metadata.annotations or {}
    why = [f'annotated {k}: "{v}"' for k, v in _BLOCKING_ANNOTATIONS.items() if annotations.get(k, "").lower() == v]
    if annotations.get(SAFE_TO_EVICT) == "true":  # exactly "true", as cluster-autoscaler reads it
        return why
    if not any(owner.controller for owner in pod.metadata.owner_references or []):
        why.append(NO_CONTROLLER)
    spared = {name.strip() for name in annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES, "").split(",")}
    why.extend(
        f"{LOCAL_STORAGE} {kind} {name!r} would be lost" for kind, name in _local_storage(pod) if name not in spared
    )
    return why


def _local_storage(pod: V1Pod) -> list[tuple[str, str]]:
    """The pod's volumes a node's removal loses, as (kind, name): ``hostPath`` ones, and ``emptyDir`` ones not backed
    by memory (tmpfs is not local storage: cluster-autoscaler ``isLocalVolume``)."""
    local = []
    for volume in pod.spec.volumes or []:
        if volume.host_path is not None:
            local.append(("hostPath", volume.name))
        elif volume.empty_dir is not None and volume.empty_dir.medium != "Memory":
            local.append(("emptyDir", volume.name))
    return local
