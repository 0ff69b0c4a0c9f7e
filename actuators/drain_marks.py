"""The marks our drains leave on their nodes, as a drainer reads them: which drain is in progress on each unit of a
pool, which are forced, and the marks of drains that ended while they were still on a node (a person's
``kubectl uncordon`` patches ``spec.unschedulable`` alone), which are taken off, never read as a drain of ours.
``KubernetesDrainMarks`` is the ``KubernetesUnitSurvey`` a ``KubernetesUnitDrainer`` (``actuators.kubernetes_drain``)
builds on; the marks themselves are defined in ``actuators.drain_units``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence, Set

from actuators.drain_survey import KubernetesUnitSurvey
from actuators.drain_units import DRAIN_ANNOTATION, FORCED_ANNOTATION, DrainUnits, cordoned, drain_marks, ended_drains
from actuators.vendor_errors import from_kubernetes
from kube.api import KubernetesApi
from kube.models import V1Node
from models import ActuatorError
from models.clock import Clock
from models.errors import KubernetesApiError, KubernetesNotFound

log = logging.getLogger(__name__)
DRAIN_MARKS = (DRAIN_ANNOTATION, FORCED_ANNOTATION)


class KubernetesDrainMarks(KubernetesUnitSurvey):
    """Reads (and, where this replica may write, clears) the drain marks of a pool's units."""

    def __init__(
        self, api: KubernetesApi, clock: Clock, units: DrainUnits, accelerator_resources: Iterable[str] = ()
    ) -> None:
        super().__init__(api, clock, units, accelerator_resources)
        self._nodes_api = api.nodes
        self._ended: dict[str, set[str]] = {}  # unit -> keys of ended drains whose marks are still on its nodes
        self._may_write: Callable[[], bool] = lambda: True

    def guard_writes(self, may_write: Callable[[], bool]) -> None:
        """Checked before every eviction and before the unit's removal, not only when a drain call starts: a drain
        that outlives this replica's leadership (a slow API, many pods) stops before its next write, and the new
        leader continues it from the nodes' drain annotation."""
        self._may_write = may_write

    def unforced_drains(self, pool_id: str) -> Set[str]:
        """Units of the pool being drained (a node cordoned and carrying our drain annotation) none of whose nodes
        carries the mark of a forced drain with that drain's key: releases of idle units, as ``drain`` reads them."""
        return {
            unit
            for unit, (key, nodes) in self._drains_of(pool_id).items()
            if key is not None and not any(drain_marks(n).get(FORCED_ANNOTATION) == key for n in nodes)
        }

    def _drains_of(self, pool_id: str) -> dict[str, tuple[str | None, Sequence[V1Node]]]:
        """Every unit of the pool (one read), with the key of our drain in progress on it (None: none) and its nodes.
        A drain whose marks are left on a node a person uncordoned has ended (``drain_units.ended_drains``): its
        marks are taken off every node of the unit that carries no other drain's (a cordon left as it is: it is
        someone else's now), and until they are gone (this replica may not write, or the patch failed) the drain's
        key is remembered as ended, so a later cordon of the node by anyone else is not taken over as ours."""
        drains: dict[str, tuple[str | None, Sequence[V1Node]]] = {}
        for unit, nodes in self._call(pool_id, lambda: self._units.of_pool(pool_id)).items():
            marked = {key for node in nodes for key in drain_marks(node).values()}
            ended = (self._ended.pop(unit, set()) | ended_drains(nodes)) & marked
            live = (drain_marks(n).get(DRAIN_ANNOTATION) for n in nodes if cordoned(n))
            key = next((k for k in live if k and k not in ended), None)
            stale = [
                node.metadata.name
                for node in nodes
                if (marks := drain_marks(node)) and (not cordoned(node) or marks.get(DRAIN_ANNOTATION) in ended)
            ]
            if stale and not self._unmark(pool_id, stale):
                self._ended[unit] = ended
            drains[unit] = (key, nodes)
        return drains

    def _unmark(self, pool_id: str, nodes: Sequence[str]) -> bool:
        """Take our drain marks off ``nodes`` (not their cordon); False when that was not written."""
        if not self._may_write():
            return False
        try:
            for node in nodes:
                self._patch_node(pool_id, node, {"metadata": {"annotations": dict.fromkeys(DRAIN_MARKS)}})
        except ActuatorError as exc:  # remembered as ended meanwhile; read and cleared again next time
            log.warning("pool %s: the marks of ended drains on %s could not be removed: %s", pool_id, nodes, exc)
            return False
        log.info("pool %s: marks of drains that ended (uncordoned by a person) removed from %s", pool_id, nodes)
        return True

    def _patch_node(self, pool_id: str, node: str, body: Mapping[str, object]) -> V1Node | None:
        """The node as patched; None when the node is gone (404): its Node object was deleted outside this drain, by
        a person or by the cloud's node controller once the instance behind it is gone, e.g. a preempted Spot VM
        (https://kubernetes.io/docs/concepts/architecture/cloud-controller-manager/#node-controller). Not an error
        of the pool: there is nothing left to drain."""
        try:
            return self._nodes_api.patch(node, body)
        except KubernetesNotFound:
            return None
        except KubernetesApiError as exc:
            raise from_kubernetes(pool_id, exc) from exc
