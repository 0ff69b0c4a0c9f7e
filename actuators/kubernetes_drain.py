"""KubernetesNodeDrainer: find idle accelerator nodes, cordon them, evict their pods safely, then remove exactly them.

Idle means the node is schedulable and no pod on it requests an accelerator resource (any extended resource the
node advertises, such as a GPU, a MIG profile or a TPU, or a resource a demand class names; DaemonSet pods, mirror
pods of static pods and finished pods are ignored), continuously since the first time this drainer saw it so;
after a restart that memory starts again, which only delays a scale-in.

A drain cordons the node and evicts its pods through the Eviction API, so PodDisruptionBudgets are respected: a 429
means "not now", the drain reports itself started and the same key continues it on a later tick; nothing is ever
deleted by force. An accepted eviction is a graceful delete: the pod stays listed, Terminating
(``metadata.deletionTimestamp`` set), while its containers shut down, for up to its
``terminationGracePeriodSeconds`` (a training job's checkpoint on SIGTERM), so the drain also reports itself started
until no pod it counts is left on the node; a terminating pod is waited for, never evicted again. A pod that must
not be disrupted blocks the drain (see below), and so does a pod selected by more than one PodDisruptionBudget (the
Eviction API answers 500: a misconfiguration no retry fixes): the node is uncordoned and the drain rejected, its
detail naming each blocking pod and why. An eviction refused for good (e.g. 403) uncordons the node and is raised as
a permanent error; any other failure is raised as transient until ``timeout``. After ``timeout`` (counted from the
first step with the drain's key, so an earlier drain of the node that was dropped, e.g. a person uncordoned it, does
not count) a drain that still has pods to evict (held by a budget, or their eviction failing) gives up and
uncordons; one left only with pods still terminating past their grace period (their kubelet is gone and never
finishes them) removes the node anyway and says so in its detail and a warning. When the node is empty, the
``NodeRemover`` (the pool's actuator) deletes exactly that node; a removal it refuses for good, or that still fails
after ``timeout`` (an AWS group at its minimum size), uncordons the empty node: back in service, not left cordoned,
paid for and unusable. A node that leaves the cluster during its drain (deleted by a person, or its instance gone)
ends the drain DONE: nothing is left to drain or remove, and the pool is not at fault. While a drain is in progress
the node carries the annotation ``leadtime.io/drain-key`` (the drain's key), so ``draining_nodes`` lets a restarted
or newly elected agent continue it instead of leaving the node cordoned; the timeout then counts from when that
agent took it over.

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
nothing. Idleness is about accelerators only, so an idle node holding such a pod is still offered as idle; its
drain is rejected, and the agent leaves the node alone for a stabilization window.

``pool_nodes`` lists every schedulable node of the pool, cheapest to lose first, for a forced release (a budget's
hard stop) that may take busy nodes: idle nodes (longest idle first), then busy ones by the work a drain would send
back to the queue as far as the pods show it: nodes where a pod must not be disrupted (by the same rules) last
(their drain would be rejected), then fewest accelerator pods, then fewest accelerators those pods request, then by
name. How long a pod has run or when it last saved its work is not in the pod, so it does not weigh in. Draining a
busy node is the same drain: its pods are evicted through the Eviction API, so disruption budgets still hold.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from actuators.idempotency import KeyedResults
from actuators.vendor_errors import from_kubernetes
from kube.api import KubernetesApi
from kube.models import V1Node, V1Pod
from models import ActionResult, ActionStatus, ActuatorError, PermanentActuatorError, TransientActuatorError
from models.clock import Clock
from models.errors import KubernetesApiError, KubernetesNotFound, KubernetesThrottled

log = logging.getLogger(__name__)
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
# Set on a node while a drain of ours is in progress (value: the drain's key); removed when the drain gives up.
DRAIN_ANNOTATION = "leadtime.io/drain-key"
# Always accelerators; so is every extended resource a node advertises (a MIG profile such as
# ``nvidia.com/mig-3g.40gb``, ``nvidia.com/gpu.shared``, ``amd.com/gpu``) and every resource a demand class names.
ACCELERATOR_RESOURCES = ("nvidia.com/gpu", "google.com/tpu")
T = TypeVar("T")
# The Eviction API's 500 for a pod selected by several PodDisruptionBudgets (a misconfiguration: never retried).
_MULTIPLE_BUDGETS = "more than one PodDisruptionBudget"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
_BLOCKING_ANNOTATIONS = {SAFE_TO_EVICT: "false", "karpenter.sh/do-not-disrupt": "true"}


@dataclass(frozen=True)
class _NodeLoad:
    """What draining one schedulable node would disrupt."""

    name: str
    accelerator_pods: int
    accelerators: int  # requested by those pods
    blocked: bool  # a pod on it must not be disrupted: a drain would be rejected

    @property
    def idle(self) -> bool:
        return self.accelerator_pods == 0

    @property
    def cost(self) -> tuple[bool, int, int, str]:
        return (self.blocked, self.accelerator_pods, self.accelerators, self.name)


class NodeRemover(Protocol):
    def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult: ...


class KubernetesNodeDrainer:
    """``api`` reaches the cluster (each call bounded by its request timeout); ``node_pools`` maps our pool ids to
    node pool label values; ``accelerator_resources`` are resources (besides ``ACCELERATOR_RESOURCES`` and the
    node's own extended resources) whose request makes a pod accelerator work: the demand classes' resources."""

    def __init__(
        self,
        api: KubernetesApi,
        clock: Clock,
        node_pools: Mapping[str, str],
        remover: NodeRemover,
        timeout: timedelta = timedelta(minutes=15),
        pool_label: str = NODE_POOL_LABEL,
        accelerator_resources: Iterable[str] = (),
    ) -> None:
        self._nodes_api = api.nodes
        self._pods_api = api.pods
        self._clock = clock
        self._node_pools = dict(node_pools)
        self._remover = remover
        self._timeout = timeout
        self._pool_label = pool_label
        self._accelerator_resources = frozenset(ACCELERATOR_RESOURCES) | frozenset(accelerator_resources)
        self._idle_since: dict[str, datetime] = {}
        self._draining_since: dict[str, tuple[str, datetime]] = {}  # node -> (key, start) of its drain
        self._results = KeyedResults(settled_only=True)
        self._may_write: Callable[[], bool] = lambda: True

    def guard_writes(self, may_write: Callable[[], bool]) -> None:
        """Checked before every eviction and before the node's removal, not only when a drain call starts: a drain
        that outlives this replica's leadership (a slow API, many pods) stops before its next write, and the new
        leader continues it from the node's drain annotation."""
        self._may_write = may_write

    def idle_nodes(self, pool_id: str, idle_for: timedelta) -> Sequence[str]:
        now = self._clock.now()
        idle = [(self._idle_since[n.name], n.name) for n in self._survey(pool_id) if n.idle]
        return [name for since, name in sorted(idle) if now - since >= idle_for]

    def pool_nodes(self, pool_id: str) -> Sequence[str]:
        """Schedulable nodes, idle ones first (longest idle first), then busy ones by ``_NodeLoad.cost``."""
        loads = self._survey(pool_id)
        idle = sorted((self._idle_since[n.name], n.name) for n in loads if n.idle)
        busy = sorted((n for n in loads if not n.idle), key=lambda n: n.cost)
        return [name for _, name in idle] + [n.name for n in busy]

    def draining_nodes(self, pool_id: str) -> Mapping[str, str]:
        """Cordoned nodes of the pool carrying our drain annotation, with the key of their drain."""
        draining = {}
        for node in self._nodes(pool_id):
            key = (node.metadata.annotations or {}).get(DRAIN_ANNOTATION)
            if key and node.spec and node.spec.unschedulable:
                draining[node.metadata.name] = key
        return draining

    def drain(self, pool_id: str, node: str, key: str) -> ActionResult:
        if (known := self._results.get(key)) is not None:
            return known
        now = self._clock.now()
        since = self._draining_since.get(node)
        if since is None or since[0] != key:  # a new drain of the node, after one dropped (a person uncordoned it)
            since = self._draining_since[node] = (key, now)
        overdue = now - since[1] >= self._timeout
        if not self._cordon(pool_id, node, key):
            return self._gone(key, pool_id, node)
        pods = [p for p in self._pods_on(pool_id, node) if _counts(p)]
        blockers = [f"{'/'.join(_name(p))} ({', '.join(reasons)})" for p in pods if (reasons := _must_stay(p))]
        if blockers:
            return self._reject(key, pool_id, node, f"pods that must not be disrupted: {'; '.join(blockers)}")
        moved = False
        for pod in pods:
            if _terminating(pod):
                continue  # already on its way out: waited for, never evicted again
            self._check_may_write(pool_id, node)
            try:
                moved |= self._evict(pod)
            except KubernetesApiError as exc:
                if exc.status == 500 and _MULTIPLE_BUDGETS in exc.detail:
                    why = f"pod {_name(pod)} is selected by {_MULTIPLE_BUDGETS}, so the Eviction API refuses it"
                    return self._reject(key, pool_id, node, why)
                error = from_kubernetes(pool_id, exc)
                if isinstance(error, PermanentActuatorError):
                    self._give_up(pool_id, node, f"evicting {_name(pod)} refused: {error}")
                    raise error from exc
                if overdue:
                    detail = f"evicting {_name(pod)} still fails after {self._timeout} ({error})"
                    return self._fail(key, pool_id, node, detail)
                raise error from exc
        if moved:  # which of the evicted pods are gone already, and which are terminating
            pods = [p for p in self._pods_on(pool_id, node) if _counts(p)]
        terminating = [_name(p) for p in pods if _terminating(p)]
        waiting = [_name(p) for p in pods if not _terminating(p)]
        if waiting and overdue:
            return self._fail(key, pool_id, node, f"disruption budgets still block {waiting} after {self._timeout}")
        if waiting or (terminating and not (overdue and all(_past_grace(p, now) for p in pods))):
            detail = "; ".join(
                [f"waiting for disruption budgets to allow evicting {waiting} from {node}"] * bool(waiting)
                + [f"waiting for {terminating} on {node} to finish terminating"] * bool(terminating)
            )
            log.info("pool %s: %s (key %s)", pool_id, detail, key)
            return self._result(key, pool_id, ActionStatus.STARTED, detail)
        return self._remove(key, pool_id, node, terminating, overdue)

    # -- internals -----------------------------------------------------------------------------------------
    def _nodes(self, pool_id: str) -> list[V1Node]:
        label = self._node_pools.get(pool_id)
        if label is None:
            raise PermanentActuatorError(pool_id, "no node pool label is mapped to this pool")
        return self._call(pool_id, lambda: self._nodes_api.with_label(f"{self._pool_label}={label}"))

    def _survey(self, pool_id: str) -> list[_NodeLoad]:
        """The load of every schedulable node of the pool; idle ones are remembered idle from now on if they were
        not already, busy ones are forgotten."""
        now = self._clock.now()
        loads = []
        for node in self._nodes(pool_id):
            name = node.metadata.name
            if node.spec and node.spec.unschedulable:  # cordoned: being drained, or held by a person
                continue
            resources = self._accelerator_resources | _extended_resources(node)
            pods = [p for p in self._pods_on(pool_id, name) if _counts(p)]
            working = [p for p in pods if _needs_accelerator(p, resources)]
            blocked = any(_must_stay(p) for p in pods)
            load = _NodeLoad(name, len(working), sum(_accelerators(p, resources) for p in working), blocked)
            if load.idle:
                self._idle_since.setdefault(name, now)
            else:
                self._idle_since.pop(name, None)
            loads.append(load)
        return loads

    def _pods_on(self, pool_id: str, node: str) -> list[V1Pod]:
        return self._call(pool_id, lambda: self._pods_api.on_node(node))

    def _evict(self, pod: V1Pod) -> bool:
        """True when the pod is gone or on its way (terminating); False when a disruption budget says not now
        (HTTP 429). Any other refusal is raised."""
        namespace, name = _name(pod)
        try:
            self._pods_api.evict(name, namespace)
        except KubernetesNotFound:
            return True
        except KubernetesThrottled:
            return False
        return True

    def _cordon(self, pool_id: str, node: str, drain_key: str | None) -> bool:
        """Cordon and mark the node with the drain's key, or (``None``) uncordon it and remove the mark; False when
        the node is gone."""
        body = {
            "spec": {"unschedulable": True if drain_key else None},
            "metadata": {"annotations": {DRAIN_ANNOTATION: drain_key}},
        }
        return self._patch_node(pool_id, node, body)

    def _patch_node(self, pool_id: str, node: str, body: Mapping[str, object]) -> bool:
        """False when the node is gone (404): its Node object was deleted outside this drain, by a person or by the
        cloud's node controller once the instance behind it is gone, e.g. a preempted Spot VM
        (https://kubernetes.io/docs/concepts/architecture/cloud-controller-manager/#node-controller). Not an error
        of the pool: there is nothing left to drain."""
        try:
            self._nodes_api.patch(node, body)
        except KubernetesNotFound:
            return False
        except KubernetesApiError as exc:
            raise from_kubernetes(pool_id, exc) from exc
        return True

    def _remove(
        self, key: str, pool_id: str, node: str, terminating: list[tuple[str, str]], overdue: bool
    ) -> ActionResult:
        """The empty node (or one left only with pods past their grace periods) goes, through the pool's actuator."""
        self._check_may_write(pool_id, node)
        try:
            removed = self._remover.delete_nodes(pool_id, [node], key)
        except ActuatorError as exc:  # e.g. a group at its minimum size, or a cloud API that keeps failing
            if isinstance(exc, PermanentActuatorError):
                self._give_up(pool_id, node, f"the node cannot be removed: {exc}")
                raise
            if not overdue:
                raise  # retried with the same key on the next tick
            return self._fail(key, pool_id, node, f"removing the empty node still fails after {self._timeout} ({exc})")
        self._patch_node(pool_id, node, {"metadata": {"annotations": {DRAIN_ANNOTATION: None}}})  # gone: unmarked too
        self._draining_since.pop(node, None)
        self._idle_since.pop(node, None)
        if terminating:
            drained = (
                f"node {node} removed with {terminating} still terminating after {self._timeout}, past their grace "
                "periods (their kubelet does not finish them)"
            )
            log.warning("pool %s: %s (key %s)", pool_id, drained, key)
        else:
            drained = f"node {node} drained"
            log.info("pool %s: node %s drained and removed (key %s)", pool_id, node, key)
        return self._results.remember(self._result(key, pool_id, ActionStatus.DONE, f"{drained}; {removed.detail}"))

    def _gone(self, key: str, pool_id: str, node: str) -> ActionResult:
        """The node left the cluster during its drain: the drain is over, settled DONE (the node is out of the pool,
        which is what the drain was for); nothing is removed through the pool's actuator."""
        self._draining_since.pop(node, None)
        self._idle_since.pop(node, None)
        detail = f"node {node} is gone from the cluster (deleted outside this drain); nothing left to drain or remove"
        log.warning("pool %s: %s (key %s)", pool_id, detail, key)
        return self._results.remember(self._result(key, pool_id, ActionStatus.DONE, detail))

    def _check_may_write(self, pool_id: str, node: str) -> None:
        if not self._may_write():
            raise TransientActuatorError(
                pool_id, f"this replica stopped leading during the drain of {node}; stopped before its next write"
            )

    def _reject(self, key: str, pool_id: str, node: str, why: str) -> ActionResult:
        """A drain no retry can finish: uncordon and settle the key REJECTED."""
        self._give_up(pool_id, node, why)
        detail = f"{why}; node {node} uncordoned"
        return self._results.remember(self._result(key, pool_id, ActionStatus.REJECTED, detail))

    def _fail(self, key: str, pool_id: str, node: str, why: str) -> ActionResult:
        """A drain past its timeout: uncordon and settle the key FAILED."""
        self._give_up(pool_id, node, why)
        detail = f"{why}; node {node} uncordoned"
        return self._results.remember(self._result(key, pool_id, ActionStatus.FAILED, detail))

    def _give_up(self, pool_id: str, node: str, why: str) -> None:
        self._cordon(pool_id, node, None)  # a node gone meanwhile needs no uncordoning
        self._draining_since.pop(node, None)
        log.warning("pool %s: drain of %s abandoned (%s); node uncordoned", pool_id, node, why)

    def _result(self, key: str, pool_id: str, status: ActionStatus, detail: str) -> ActionResult:
        return ActionResult(key, pool_id, status, self._clock.now(), detail=detail)

    def _call(self, pool_id: str, request: Callable[[], T]) -> T:
        try:
            return request()
        except KubernetesApiError as exc:
            raise from_kubernetes(pool_id, exc) from exc


def _name(pod: V1Pod) -> tuple[str, str]:
    return (pod.metadata.namespace, pod.metadata.name)


def _counts(pod: V1Pod) -> bool:
    """Pods a drain has to move: not DaemonSet-owned, not a static pod's mirror, not finished."""
    owners = pod.metadata.owner_references or []
    if any(o.kind == "DaemonSet" for o in owners):
        return False
    if "kubernetes.io/config.mirror" in (pod.metadata.annotations or {}):
        return False
    return (pod.status.phase if pod.status else None) not in ("Succeeded", "Failed")


def _terminating(pod: V1Pod) -> bool:
    """Deleted (evicted) and not yet gone: its containers are shutting down within its grace period."""
    return pod.metadata.deletion_timestamp is not None


def _past_grace(pod: V1Pod, now: datetime) -> bool:
    """Terminating and past its ``deletionTimestamp`` (the deletion's time plus the grace period: when the kubelet
    should have killed its containers)."""
    stamp = pod.metadata.deletion_timestamp
    return stamp is not None and now >= stamp


def _extended_resources(node: V1Node) -> frozenset[str]:
    """The extended resources the node advertises (device plugins': GPUs, MIG profiles, shared GPUs, TPUs...).
    Kubernetes' own resources are not: a name without a "/" (cpu, memory, ephemeral-storage, pods, hugepages-*)
    or in the kubernetes.io domain (``IsExtendedResourceName`` and ``IsNativeResource`` in kubernetes
    pkg/apis/core/v1/helper/helpers.go; https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/
    #extended-resources)."""
    status = node.status
    advertised = {**(status.capacity or {}), **(status.allocatable or {})} if status else {}
    return frozenset(r for r in advertised if "/" in r and "kubernetes.io/" not in r)


def _needs_accelerator(pod: V1Pod, resources: frozenset[str]) -> bool:
    return any(amount not in ("0", "") for amount in _accelerator_amounts(pod, resources))


def _accelerators(pod: V1Pod, resources: frozenset[str]) -> int:
    """Accelerators the pod asks for; an amount that is not a whole number (extended resources are integers, so
    only a malformed one) counts as one."""
    total = 0
    for amount in _accelerator_amounts(pod, resources):
        if amount in ("0", ""):
            continue
        try:
            total += max(0, int(amount))
        except ValueError:
            total += 1
    return total


def _accelerator_amounts(pod: V1Pod, resources: frozenset[str]) -> list[str]:
    """Per container and accelerator resource (of ``resources``), the amount requested (a limit stands for a missing
    request)."""
    amounts: list[str] = []
    for container in pod.spec.containers or []:
        requests = (container.resources.requests if container.resources else None) or {}
        limits = (container.resources.limits if container.resources else None) or {}
        merged = {**limits, **requests}
        amounts.extend(str(merged.get(r, "0")) for r in sorted(resources))
    return amounts


def _must_stay(pod: V1Pod) -> list[str]:
    """Why the pod must not be evicted (see the module's docstring); empty when it may be, or is terminating."""
    if _terminating(pod):
        return []
    annotations = pod.metadata.annotations or {}
    why = [f'annotated {k}: "{v}"' for k, v in _BLOCKING_ANNOTATIONS.items() if annotations.get(k, "").lower() == v]
    if annotations.get(SAFE_TO_EVICT) == "true":  # exactly "true", as cluster-autoscaler reads it
        return why
    if not any(owner.controller for owner in pod.metadata.owner_references or []):
        why.append("no controller recreates it")
    spared = {name.strip() for name in annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES, "").split(",")}
    why.extend(
        f"local storage {kind} {name!r} would be lost" for kind, name in _local_storage(pod) if name not in spared
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
