"""The units a drain takes out of a pool, what removes them, and the marks a drain leaves on their nodes.

A unit is what a drain takes out of the pool whole: a node (``NodeUnits``: each node with the pool's label), or
every node of a TPU slice (``actuators.slice_drain``); ``DrainUnits`` is how a drainer finds a pool's units and their
nodes. Once a unit is drained, its pool's actuator deletes it as a whole (``NodeRemover``); one that can tell before a
drain that it would not remove the unit now (an AWS group at its minimum size) says so (``KeepsUnits``), and the drain
is not started.

A drain's key is checked against the marks its unit's nodes carry before the drain is ended or stepped
(``actuators.drain_holders``), on the unit's Node objects read from Kubernetes alone (``read_unit_nodes``): never
through ``of_pool``, which for a slice asks the cloud first which slices are ready, so a cloud that cannot be read does
not keep a drain from being ended.

While a drain is in progress its nodes carry ``DRAIN_ANNOTATION`` (the drain's key), and those of a forced drain
``FORCED_ANNOTATION`` too, so an agent that continues the drain knows it is one of ours, and whether it is forced
(``actuators.kubernetes_drain``). The marks say a drain is in progress only on a cordoned node: a person who ends a
drain with ``kubectl uncordon`` patches ``spec.unschedulable`` alone and leaves them, and a later cordon by anyone
else must not bring that drain back (``ended_drains``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from actuators.drain_mark_names import DRAIN_ANNOTATION, FORCED_ANNOTATION
from kube.api import Nodes
from kube.models import V1Node
from models import ActionResult, PermanentActuatorError
from models.errors import KubernetesNotFound

NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"


def cordoned(node: V1Node) -> bool:
    return bool(node.spec and node.spec.unschedulable)


def drain_marks(node: V1Node) -> dict[str, str]:
    """The marks of our drains set on the node (``DRAIN_ANNOTATION``, ``FORCED_ANNOTATION``), by annotation."""
    annotations = node.metadata.annotations or {}
    return {name: annotations[name] for name in (DRAIN_ANNOTATION, FORCED_ANNOTATION) if annotations.get(name)}


def ended_drains(nodes: Sequence[V1Node]) -> set[str]:
    """The keys of drains whose marks outlived them on the unit's ``nodes``: marked on a node that is schedulable
    (uncordoned by a person: our own ends remove the marks with the cordon, in one patch) and on no cordoned node of
    the unit, where the drain would still be under way."""
    live = {key for node in nodes if cordoned(node) for key in drain_marks(node).values()}
    return {key for node in nodes if not cordoned(node) for key in drain_marks(node).values()} - live


class NodeRemover(Protocol):
    def delete_nodes(self, pool_id: str, nodes: Sequence[str], key: str) -> ActionResult: ...


@runtime_checkable
class KeepsUnits(Protocol):
    """A ``NodeRemover`` that can tell before a drain that it would not remove its units now (an AWS group at its
    minimum size): the drain is not started, nothing cordoned or evicted."""

    def kept_units(self, pool_id: str, units: Sequence[str], draining: Sequence[str] = ()) -> str:
        """Why these units could not be removed now, after the units ``draining`` (the pool's other drains under
        way, whose removals come first); "" when they could."""
        ...


class DrainUnits(Protocol):
    """The units of a pool as Kubernetes nodes. Reads may raise ``KubernetesApiError`` (translated by the drainer)
    or an ``ActuatorError``."""

    noun: str  # what a unit is called in results and logs: "node", "slice"
    # Whether a unit whose nodes all left the cluster during its drain is still removed through the ``NodeRemover``
    # (a slice: its node pool outlives its nodes and is still paid for) or the drain ends there (a node).
    removed_without_nodes: bool

    def of_pool(self, pool_id: str) -> Mapping[str, Sequence[V1Node]]:
        """Every unit of the pool, with its nodes."""
        ...

    def nodes(self, pool_id: str, unit: str) -> Sequence[str]:
        """The names of the unit's nodes now."""
        ...


@runtime_checkable
class ReadsUnitNodes(Protocol):
    """``DrainUnits`` that read a unit's Node objects, as they are now, from Kubernetes alone."""

    def read_nodes(self, pool_id: str, unit: str) -> Sequence[V1Node]:
        """The unit's nodes now; a node gone is left out. Reads may raise ``KubernetesApiError``."""
        ...


def read_unit_nodes(units: DrainUnits, nodes: Nodes, pool_id: str, unit: str) -> Sequence[V1Node]:
    """The unit's Node objects now, read from Kubernetes alone (never the cloud): ``ReadsUnitNodes.read_nodes``, or
    for units without it (a slice's, ``actuators.slice_drain.SliceUnits``) the nodes labelled with the unit's name as
    their node pool: the one list ``SliceUnits.nodes`` reads for their names."""
    if isinstance(units, ReadsUnitNodes):
        return units.read_nodes(pool_id, unit)
    return nodes.with_label(f"{NODE_POOL_LABEL}={unit}")


def named_unread(units: DrainUnits) -> bool:
    """Whether ``units`` name a unit's nodes without reading them (a node is named by itself: ``NodeUnits.nodes``),
    so that reading them (``read_unit_nodes``) is one request more; a slice's nodes are listed either way."""
    return isinstance(units, NodeUnits)


class NodeUnits:
    """Each node labelled ``<pool_label>=<value>`` is a unit of its pool; ``node_pools`` maps our pool ids to the
    values."""

    noun = "node"
    removed_without_nodes = False

    def __init__(self, nodes: Nodes, pool_label: str, node_pools: Mapping[str, str]) -> None:
        self._nodes = nodes
        self._pool_label = pool_label
        self._node_pools = dict(node_pools)

    def of_pool(self, pool_id: str) -> Mapping[str, Sequence[V1Node]]:
        label = self._node_pools.get(pool_id)
        if label is None:
            raise PermanentActuatorError(pool_id, "no node pool label is mapped to this pool")
        return {node.metadata.name: [node] for node in self._nodes.with_label(f"{self._pool_label}={label}")}

    def nodes(self, pool_id: str, unit: str) -> Sequence[str]:
        return [unit]  # not read: a node gone shows as a 404 when it is cordoned

    def read_nodes(self, pool_id: str, unit: str) -> Sequence[V1Node]:
        """The node ``unit`` as it is now, in one request: a patch that changes nothing answers the node as it is (a
        drainer may list and patch nodes, not get one: docs/kubernetes-rbac.md); none when it is gone (404)."""
        try:
            return [self._nodes.patch(unit, {})]
        except KubernetesNotFound:
            return []
