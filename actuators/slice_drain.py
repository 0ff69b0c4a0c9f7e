"""KubernetesSliceDrainer: whole TPU slices of a GKE slice group, idle and drained as units.

Slice ``g-n`` of a group is the GKE node pool ``g-n`` (``actuators.gke_tpu_slices``), and each of its nodes carries
the label ``cloud.google.com/gke-nodepool=g-n``. A slice is idle when it has nodes, none of them cordoned, and no
pod on any of them runs accelerator work (the rules of ``actuators.kubernetes_drain``), continuously for the hold
the agent asks for; one busy host keeps the whole slice, since a multi-host job spans them all. Its drain cordons
every node of the slice with the drain's annotation (so a new leader continues it), evicts their pods through the
Eviction API (disruption budgets hold: a refusal waits, nothing is forced; a pod that must not be disrupted rejects
the drain and uncordons the slice), and once every node is empty the slice actuator deletes exactly that slice, its
node pool. A slice whose nodes left the cluster during its drain is deleted all the same: its node pool outlives
them and is still paid for. No node records that drain any more, so the drainer reports the slice as draining from
its own memory while the slice is listed without nodes (``draining_nodes``); an agent that did not start the drain
(a restart, a new leader) cannot know of it, and the slice, never idle without nodes, is left to a person.

Only the group's ready slices (RUNNING, RECONCILING, RUNNING_WITH_ERROR) are units: a slice still provisioning
runs nothing yet, a failed one is removed by the next resize, a stopping one is going.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Protocol

from actuators.kubernetes_drain import NODE_POOL_LABEL, KubernetesUnitDrainer, NodeRemover
from kube.api import KubernetesApi, Nodes
from kube.models import V1Node
from models.clock import Clock


class SliceGroups(NodeRemover, Protocol):
    """The slice actuator, as a slice drainer uses it (``GkeTpuSliceActuator``)."""

    def ready_slices(self, pool_id: str) -> Sequence[str]: ...


class SliceUnits:
    """The ready slices of each pool, each with the nodes labelled with its node pool's name."""

    noun = "slice"
    removed_without_nodes = True

    def __init__(self, nodes: Nodes, slices: SliceGroups) -> None:
        self._nodes = nodes
        self._slices = slices

    def of_pool(self, pool_id: str) -> Mapping[str, Sequence[V1Node]]:
        names = list(self._slices.ready_slices(pool_id))
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
        super().__init__(api, clock, SliceUnits(api.nodes, slices), slices, timeout, accelerator_resources)
