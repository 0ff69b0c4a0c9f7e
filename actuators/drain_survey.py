"""The survey a drainer makes of a pool's units: which are idle and since when, how much work the busy ones hold, and
the reads of the pods on their nodes that the survey and each drain step share.

Idle means the node is schedulable and no pod on it requests an accelerator resource (any extended resource the
node advertises, such as a GPU, a MIG profile or a TPU, or a resource a demand class names; in an app container, an
init container or a sidecar, as the scheduler reserves it) or claims devices through Dynamic Resource Allocation
(``pod_rules.claims_devices``; DaemonSet pods, mirror pods of static pods, finished pods and pods a dead node's
kubelet left terminating are ignored: ``_keeps_busy``), continuously since the first time this drainer saw it so;
after a restart that memory starts again, which only delays a scale-in. A terminating pod is left so
(``pod_rules.abandoned``) once this drainer has seen it terminating on a node whose kubelet is gone (``Ready``
Unknown) for its grace period and a minute more, by its own clock: the pod's ``deletionTimestamp`` is the API
server's clock's, which this agent's may run ahead of. That memory, too, starts again after a restart. A drain step
also remembers since when, by the same clock, it has seen each pod terminating on any node (``_stuck``): an overdue
drain ends with a pod seen so past its grace period and ``pod_rules.STUCK_AFTER``, which no kubelet is finishing.

A survey of the pool (``idle_nodes``, ``pool_nodes``) and a drain step read the pods of all the nodes they look at
in one list when there are more than a few (``_PER_NODE_LISTS``; else one list per node), so the calls per tick do
not grow with the pool's size. That list of the cluster's pods is shared for a few seconds (``kube.api.Pods``), so
every pool of a tick, and the executor's checks after them, share one instead of one each. A drain step reads it
afresh where it must see the cluster as it is: at its first step, after cordoning, and after evictions (to see
which pods are gone or terminating); a later step shares the list, read after its nodes were cordoned.

``pool_nodes`` lists every schedulable node of the pool, cheapest to lose first, for a forced release (a budget's
hard stop) that may take busy nodes: idle nodes (longest idle first), then busy ones by the work a drain would send
back to the queue as far as the pods show it: nodes where a pod must not be disrupted (by the same rules) last
(their drain would be rejected), then fewest accelerator pods, then fewest accelerators those pods request, then by
name. How long a pod has run or when it last saved its work is not in the pod, so it does not weigh in. Draining a
busy node is the same drain: its pods are evicted through the Eviction API, so disruption budgets still hold.

A unit idle for accelerators that a drain cannot empty is not offered as idle (``idle_nodes``), since its drain would
only cordon it, perhaps evict its other pods, be rejected and uncordon it, window after window: one where a pod must
not be disrupted (``pod_rules.must_stay``: a bare pod, safe-to-evict "false", local storage), known from the pods
alone, and one whose drain was rejected for a pod the pods alone do not show blocking (selected by two
PodDisruptionBudgets: the Eviction API's 500), held from the rejection (``hold_rejected``) for as long as the pods the
rejection names are still on it unchanged (the same uid, labels and annotations: what the budgets select by and
what a drain reads; a status write, such as a readiness flip or a container restart, is no change): a pod
recreated, relabelled, re-annotated or gone ends the hold. ``held_units`` says which idle units the last survey of a
pool kept back and why, so the agent can tell the operator why an idle unit is still paid for (``TellsHeldUnits``).
The holds are this drainer's memory, kept per pool (one drainer serves every pool of the daemon): after a restart a
held unit's drain is tried, and rejected, once more.

``KubernetesUnitSurvey`` is the read side of ``actuators.kubernetes_drain.KubernetesUnitDrainer``, which drains what
it finds; it writes nothing to the cluster.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import TypeVar

from actuators.drain_units import DrainUnits
from actuators.pod_rules import (
    ACCELERATOR_RESOURCES,
    abandoned,
    accelerator_work,
    accelerators,
    counts,
    extended_resources,
    left_behind,
    must_stay,
    pod_name,
    stuck,
    terminating,
)
from actuators.vendor_errors import from_kubernetes
from kube.api import KubernetesApi
from kube.models import V1Node, V1Pod
from models.clock import Clock
from models.errors import KubernetesApiError

T = TypeVar("T")
_PodId = tuple[str, str, str, str]  # namespace, name, uid, digest of labels and annotations (``_metadata_digest``)
# A survey or a drain step reads the pods of up to this many nodes with one list each (a field selector names one
# node); of more, with one list of every pod bound to a node, in pages, grouped by node. Without consistent reads
# from the API server's cache (Kubernetes < 1.31) each list, one node's or not, reads every pod of the cluster from
# etcd (kubernetes/kubernetes#15945; KEP-2340), so per-node lists cost the server that many full reads; one list
# costs one read, but sends every pod of the cluster, which the agent then parses. A few nodes' lists cost less.
_PER_NODE_LISTS = 4
# How the drainer's rejection of a drain that found accelerator work on its unit once cordoned begins
# (``KubernetesUnitDrainer``): the pods it names are the unit's work, not pods that block a drain.
_NO_LONGER_IDLE = "no longer idle:"
# A pod seen left behind (``pod_rules.left_behind``) is forgotten once no read has seen it so for this long (seconds).
_FORGET_LEFT_AFTER = 3600.0


@dataclass(frozen=True)
class _NodeLoad:
    """What draining one schedulable unit would disrupt."""

    name: str
    accelerator_pods: int
    accelerators: int  # requested by those pods
    blocked: str  # why a drain would be rejected (a pod on it must not be disrupted, or a hold); "" when it would not

    @property
    def idle(self) -> bool:
        return self.accelerator_pods == 0

    @property
    def offered(self) -> bool:
        """Idle, and a drain could empty it."""
        return self.idle and not self.blocked

    @property
    def cost(self) -> tuple[bool, int, int, str]:
        return (bool(self.blocked), self.accelerator_pods, self.accelerators, self.name)


@dataclass(frozen=True)
class _Hold:
    """A unit whose drain was rejected for the pods ``pods`` (their identities then), held while every one of them is
    on it unchanged (a pod named in ``why`` that came since, such as one recreated under an evicted pod's name, does
    not end it)."""

    why: str
    pods: frozenset[_PodId]


class KubernetesUnitSurvey:
    """Surveys the units ``units`` finds in each pool. ``api`` reaches the cluster (each call bounded by its request
    timeout); ``accelerator_resources`` are resources (besides ``ACCELERATOR_RESOURCES`` and the node's own extended
    resources) whose request makes a pod accelerator work: the demand classes' resources."""

    def __init__(
        self, api: KubernetesApi, clock: Clock, units: DrainUnits, accelerator_resources: Iterable[str] = ()
    ) -> None:
        self._pods_api = api.pods
        self._clock = clock
        self._units = units
        self._accelerator_resources = frozenset(ACCELERATOR_RESOURCES) | frozenset(accelerator_resources)
        self._idle_since: dict[str, datetime] = {}
        # (pool, unit) -> its drain's rejection, held while the pods it names are unchanged. One drainer serves every
        # pool of the daemon, so a survey prunes the holds of its own pool only.
        self._holds: dict[tuple[str, str], _Hold] = {}
        self._held: dict[str, dict[str, str]] = {}  # pool -> idle units its last survey kept back, and why
        # pod uid -> (first, last) monotonic time this drainer saw it terminating on a node whose kubelet is gone
        self._left_seen: dict[str, tuple[float, float]] = {}
        # pod uid -> (first, last) monotonic time a drain step of this drainer saw it terminating, on any node
        self._terminating_seen: dict[str, tuple[float, float]] = {}

    def idle_nodes(self, pool_id: str, idle_for: timedelta) -> Sequence[str]:
        """Units idle for ``idle_for`` that a drain could empty, longest idle first."""
        now = self._clock.now()
        idle = [(self._idle_since[n.name], n.name) for n in self._survey(pool_id) if n.offered]
        return [name for since, name in sorted(idle) if now - since >= idle_for]

    def pool_nodes(self, pool_id: str) -> Sequence[str]:
        """Schedulable units: idle ones a drain could empty first (longest idle first), then the others by
        ``_NodeLoad.cost`` (those a drain could not empty last)."""
        loads = self._survey(pool_id)
        idle = sorted((self._idle_since[n.name], n.name) for n in loads if n.offered)
        rest = sorted((n for n in loads if not n.offered), key=lambda n: n.cost)
        return [name for _, name in idle] + [n.name for n in rest]

    def held_units(self, pool_id: str) -> Mapping[str, str]:
        return dict(self._held.get(pool_id, {}))

    def hold_rejected(self, pool_id: str, unit: str, why: str) -> None:
        """Hold the unit while the pods on it that ``why`` names (as ``namespace/name`` or ``('namespace',
        'name')``, as the drainer's rejections name them) are there unchanged; nothing when it names none of them
        (the pool's size stopped the drain) or when work that started on the unit did (``_NO_LONGER_IDLE``): the
        unit is busy, not blocked, and a hold would put it last in a forced release's order, after units running more
        work. One read of the unit's pods."""
        if why.startswith(_NO_LONGER_IDLE):
            return
        nodes = self._call(pool_id, lambda: self._units.nodes(pool_id, unit))
        named = _named(self._pods_of(pool_id, nodes, fresh=True), why)
        if named:
            self._holds[(pool_id, unit)] = _Hold(why, named)

    # -- internals -----------------------------------------------------------------------------------------
    def _keeps_busy(self, pod: V1Pod, resources: frozenset[str], node: V1Node) -> bool:
        """Accelerator work (``pod_rules.accelerator_work``) on ``node`` that keeps it from being idle: not a pod
        its dead kubelet left Terminating (``_abandoned``). One within its grace period is busy (a training job
        checkpointing on SIGTERM), and so is any on a node whose kubelet is alive, which is still shutting it down;
        counted, an abandoned pod would keep its dead node busy, never drained and paid for, for good."""
        return accelerator_work(pod, resources) and not self._abandoned(pod, node)

    def _abandoned(self, pod: V1Pod, node: V1Node) -> bool:
        """``pod_rules.abandoned``, timed from the first time this drainer saw the pod left behind on ``node``
        (``pod_rules.left_behind``); a pod seen otherwise (its kubelet back) starts that time again."""
        seen_for = _seen_for(self._left_seen, pod, left_behind(pod, node), self._clock.monotonic())
        return seen_for is not None and abandoned(pod, node, seen_for)

    def _stuck(self, pod: V1Pod) -> bool:
        """``pod_rules.stuck``, timed from the first time this drainer saw the pod terminating, on any node."""
        seen_for = _seen_for(self._terminating_seen, pod, terminating(pod), self._clock.monotonic())
        return seen_for is not None and stuck(pod, seen_for)

    def _forget_left(self) -> None:
        """Forget the pods left behind, or terminating, that no read has seen so for ``_FORGET_LEFT_AFTER`` (gone, or
        on nodes gone)."""
        now = self._clock.monotonic()
        for seen in (self._left_seen, self._terminating_seen):
            for key, (_, last) in list(seen.items()):
                if now - last >= _FORGET_LEFT_AFTER:
                    del seen[key]

    def _working(self, nodes: Sequence[V1Node], pods: Mapping[str, Sequence[V1Pod]]) -> list[str]:
        """The pods on these nodes that are accelerator work by the rule the unit was found idle by, except those
        already terminating (going anyway), as ``namespace/name``."""
        working: list[str] = []
        for node in nodes:
            resources = self._accelerator_resources | extended_resources(node)
            working.extend(
                "/".join(pod_name(p))
                for p in pods[node.metadata.name]
                if accelerator_work(p, resources) and not terminating(p)
            )
        return working

    def _survey(self, pool_id: str) -> list[_NodeLoad]:
        """The load of every schedulable unit of the pool (none of its nodes cordoned; one with nodes, unless units
        are removed without nodes: a slice whose node pool has none in the cluster runs nothing, so it is idle);
        idle ones are remembered idle from now on if they were not already, busy ones are forgotten. One read of the
        units and one read of their pods (``_pods_by_node``), however many nodes the pool has."""
        now = self._clock.now()
        self._forget_left()
        units = self._call(pool_id, lambda: self._units.of_pool(pool_id))
        without_nodes = self._units.removed_without_nodes
        schedulable = {  # a unit with a cordoned node is being drained, or held by a person
            unit: nodes
            for unit, nodes in units.items()
            if (nodes or without_nodes) and not any(n.spec and n.spec.unschedulable for n in nodes)
        }
        pods = self._pods_by_node(pool_id, [node.metadata.name for nodes in schedulable.values() for node in nodes])
        for pool, unit in list(self._holds):
            if pool == pool_id and unit not in units:  # gone; a cordoned one is drained or held by a person, kept
                del self._holds[(pool, unit)]
        loads = []
        for unit, nodes in schedulable.items():
            working, requested, on_unit = 0, 0, []
            for node in nodes:
                resources = self._accelerator_resources | extended_resources(node)
                on_node = [p for p in pods[node.metadata.name] if counts(p)]
                busy = [p for p in on_node if self._keeps_busy(p, resources, node)]
                working += len(busy)
                requested += sum(accelerators(p, resources) for p in busy)
                on_unit.extend(on_node)
            load = _NodeLoad(unit, working, requested, self._blocked(pool_id, unit, on_unit))
            if load.idle:
                self._idle_since.setdefault(unit, now)
            else:
                self._idle_since.pop(unit, None)
            loads.append(load)
        self._held[pool_id] = {n.name: n.blocked for n in loads if n.idle and n.blocked}
        return loads

    def _blocked(self, pool_id: str, unit: str, pods: Sequence[V1Pod]) -> str:
        """Why a drain of the unit with these pods (those it has to move) would be rejected; "" if it would not. A
        hold whose pods changed is dropped."""
        blockers = [f"{'/'.join(pod_name(p))} ({', '.join(reasons)})" for p in pods if (reasons := must_stay(p))]
        if blockers:
            return f"pods that must not be disrupted: {'; '.join(blockers)}"
        hold = self._holds.get((pool_id, unit))
        if hold is not None and not hold.pods <= _named(pods, hold.why):
            del self._holds[(pool_id, unit)]
            return ""
        return hold.why if hold is not None else ""

    def _pods_of(self, pool_id: str, nodes: Sequence[str], fresh: bool) -> list[V1Pod]:
        """The pods a drain of these nodes has to move."""
        pods = self._pods_by_node(pool_id, nodes, fresh)
        return [p for node in nodes for p in pods[node] if counts(p)]

    def _pods_by_node(self, pool_id: str, nodes: Sequence[str], fresh: bool = False) -> dict[str, list[V1Pod]]:
        """The pods on each of these nodes: one list per node for a few nodes, else the cluster's pods bound to a
        node, grouped by node (``_PER_NODE_LISTS``), from the list the tick shares unless ``fresh`` (``Pods``)."""
        if len(nodes) > _PER_NODE_LISTS:
            now = self._clock.monotonic()
            return self._call(pool_id, lambda: self._pods_api.on_nodes(nodes, now=now, fresh=fresh))
        return {node: self._call(pool_id, partial(self._pods_api.on_node, node)) for node in nodes}

    def _call(self, pool_id: str, request: Callable[[], T]) -> T:
        try:
            return request()
        except KubernetesApiError as exc:
            raise from_kubernetes(pool_id, exc) from exc


def _seen_for(seen: dict[str, tuple[float, float]], pod: V1Pod, now_so: bool, now: float) -> timedelta | None:
    """How long (monotonic ``now`` less the first time in ``seen``) the pod has been seen so, ``now_so`` telling
    whether it is now (recorded in ``seen``); None, and forgotten there, when it is not."""
    key = pod.metadata.uid or "/".join(pod_name(pod))
    if not now_so:
        seen.pop(key, None)
        return None
    first = seen.get(key, (now, now))[0]
    seen[key] = (first, now)
    return timedelta(seconds=now - first)


def _named(pods: Iterable[V1Pod], why: str) -> frozenset[_PodId]:
    """The identities of the pods, not terminating, that ``why`` names as ``namespace/name`` or ``('namespace',
    'name')``."""
    return frozenset(
        (namespace, name, pod.metadata.uid or "", _metadata_digest(pod))
        for pod in pods
        if not terminating(pod)
        for namespace, name in [pod_name(pod)]
        if re.search(rf"(?<![\w.-]){re.escape(f'{namespace}/{name}')}(?![\w.-])", why) or repr((namespace, name)) in why
    )


def _metadata_digest(pod: V1Pod) -> str:
    """A digest of the pod's labels and annotations: a hold ends when they change (the budgets select pods by their
    labels), not at the status writes that change its resourceVersion too (the kubelet's readiness and restarts)."""
    metadata = {"labels": pod.metadata.labels or {}, "annotations": pod.metadata.annotations or {}}
    return hashlib.sha256(json.dumps(metadata, sort_keys=True).encode()).hexdigest()
