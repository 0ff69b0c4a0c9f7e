"""KubernetesSliceDrainer: whole TPU slices of a GKE slice group, idle and drained as units.

Slice ``g-n`` of a group is the GKE node pool ``g-n`` (``actuators.gke_tpu_slices``), and each of its nodes carries
the label ``cloud.google.com/gke-nodepool=g-n``. A slice is idle when none of its nodes is cordoned and no pod on
any of them runs accelerator work (the rules of ``actuators.kubernetes_drain``), continuously for the hold the
agent asks for; one busy host keeps the whole slice, since a multi-host job spans them all. Its drain cordons every
node of the slice with the drain's annotation (so a new leader continues it), evicts their pods through the Eviction
API (disruption budgets hold: a refusal waits, nothing is forced; a pod that must not be disrupted rejects the drain
and uncordons the slice), and once every node is empty the slice actuator deletes exactly that slice, its node pool.
A slice whose nodes left the cluster during its drain is deleted all the same: its node pool outlives them and is
still paid for. No node records that drain any more, so the drainer reports the slice as draining from its own
memory while the slice is listed without nodes (``draining_nodes``), and tells the slice actuator so
(``slices_without_nodes`` leaves it out): it is still the ready slice the drain takes out. Any other ready slice
without a node in the cluster serves nothing: the slice actuator counts it in flight, then failed (deleted by the
next resize), so it is no unit of the drainer's; an agent that did not start such a drain (a restart, a new leader)
finds it so.

Only the group's ready slices (RUNNING, RECONCILING, RUNNING_WITH_ERROR with every host running) are units: a slice
still provisioning, or short of hosts, runs nothing yet, a failed one is removed by the next resize, a stopping one
is going. The drainer tells the slice actuator which ERROR slices have a node at work (``busy_slices``, read by the
actuator from the drainer's construction on): GKE leaves a node pool in ERROR while its nodes run, and such a slice
is never deleted undrained as a failed slice: with every host running it is a ready unit, drained when idle; with
hosts missing it is broken, no unit of the drainer's (its job cannot run, and its pod keeps it busy), left to a
person.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from datetime import timedelta
from typing import Protocol

from actuators.gke_tpu_slices import SliceHosts
from actuators.kubernetes_drain import NODE_POOL_LABEL, KubernetesUnitDrainer, NodeRemover
from actuators.pod_rules import extended_resources
from kube.api import KubernetesApi, Nodes
from kube.models import V1Node
from models.clock import Clock

# Longer than a tick's own work (observe, plan, act: seconds), shorter than the default tick interval (60 s): one read
# of the slice list per tick (with ticks shorter than this, one per this long).
_SLICE_LIST_FRESH_FOR = timedelta(seconds=15)


class SliceGroups(NodeRemover, Protocol):
    """The slice actuator, as a slice drainer uses it (``GkeTpuSliceActuator``)."""

    def ready_slices(self, pool_id: str) -> Sequence[str]: ...

    def read_hosts_from(self, nodes: SliceHosts) -> None: ...


class SliceUnits:
    """The ready slices of each pool, each with the nodes labelled with its node pool's name.

    The ready slices come from the cloud's node pool list, read at most once per ``fresh_for`` (on the clock's
    monotonic time): a tick's observation (drains in progress, idle slices) and its executor's checks, seconds apart,
    share one read instead of one each. A list that old misses only a slice that became ready meanwhile (idle a tick
    later) or still names one being deleted (its nodes cordoned: never idle, and its drain is already settled)."""

    noun = "slice"
    removed_without_nodes = True

    def __init__(self, nodes: Nodes, slices: SliceGroups, clock: Clock, fresh_for: timedelta) -> None:
        self._nodes = nodes
        self._slices = slices
        self._clock = clock
        self._fresh_s = fresh_for.total_seconds()
        self._ready: dict[str, tuple[float, list[str]]] = {}  # pool -> (monotonic time read, ready slices)

    def ready(self, pool_id: str) -> list[str]:
        now = self._clock.monotonic()
        known = self._ready.get(pool_id)
        if known is None or now - known[0] >= self._fresh_s:
            known = self._ready[pool_id] = (now, list(self._slices.ready_slices(pool_id)))
        return known[1]

    def of_pool(self, pool_id: str) -> Mapping[str, Sequence[V1Node]]:
        names = self.ready(pool_id)
        units: dict[str, list[V1Node]] = {name: [] for name in names}
        if names:
            for node in self._nodes.with_label(f"{NODE_POOL_LABEL} in ({','.join(names)})"):
                units.setdefault((node.metadata.labels or {}).get(NODE_POOL_LABEL, ""), []).append(node)
        return units

    def nodes(self, pool_id: str, unit: str) -> Sequence[str]:
        return [node.metadata.name for node in self._nodes.with_label(f"{NODE_POOL_LABEL}={unit}")]


class KubernetesSliceDrainer(KubernetesUnitDrainer):
    """``slices`` is the groups' ``GkeTpuSliceActuator``: it lists their ready slices and deletes drained ones."""

    def __init__(
        self,
        api: KubernetesApi,
        clock: Clock,
        slices: SliceGroups,
        timeout: timedelta = timedelta(minutes=15),
        accelerator_resources: Iterable[str] = (),
    ) -> None:
        units = SliceUnits(api.nodes, slices, clock, _SLICE_LIST_FRESH_FOR)
        super().__init__(api, clock, units, slices, timeout, accelerator_resources)
        self._with_nodes: dict[str, tuple[float, frozenset[str], frozenset[str]]] = {}  # pool -> (read, asked, found)
        slices.read_hosts_from(self)

    def slices_without_nodes(self, pool_id: str, slices: Sequence[str]) -> Set[str]:
        """Of these slices, those with no node registered in the cluster, less those this drainer is draining (their
        nodes left during the drain, which deletes them). One list of their nodes, answered again for the same slices
        within ``_SLICE_LIST_FRESH_FOR`` (a tick's reads of the slice group share it)."""
        asked, now = frozenset(slices), self._clock.monotonic()
        if not asked:
            return set()
        known = self._with_nodes.get(pool_id)
        if known is None or known[1] != asked or now - known[0] >= _SLICE_LIST_FRESH_FOR.total_seconds():
            selector = f"{NODE_POOL_LABEL} in ({','.join(sorted(asked))})"
            nodes = self._call(pool_id, lambda: self._nodes_api.with_label(selector))
            found = frozenset((node.metadata.labels or {}).get(NODE_POOL_LABEL, "") for node in nodes) & asked
            known = self._with_nodes[pool_id] = (now, asked, found)
        return set(asked - known[2]) - set(self._draining_since)

    def busy_slices(self, pool_id: str, slices: Sequence[str]) -> Set[str]:
        """Of these slices, those with a node registered in the cluster on which a pod runs accelerator work (by
        the rules an idle slice is found with): one list of their nodes, one read of their pods."""
        if not slices:
            return set()
        selector = f"{NODE_POOL_LABEL} in ({','.join(slices)})"
        nodes = self._call(pool_id, lambda: self._nodes_api.with_label(selector))
        pods = self._pods_by_node(pool_id, [node.metadata.name for node in nodes])
        busy = set()
        for node in nodes:
            resources = self._accelerator_resources | extended_resources(node)
            if any(self._keeps_busy(p, resources, node) for p in pods[node.metadata.name]):
                busy.add((node.metadata.labels or {}).get(NODE_POOL_LABEL, ""))
        return busy & set(slices)
