"""The marks our drains leave on their nodes, as a drainer reads them: which drain is in progress on each unit of a
pool, which are forced, when each started (``drain_started``: a drain taken over counts its timeout from there), and
the marks of drains that ended while they were still on a node (a person's ``kubectl uncordon`` patches
``spec.unschedulable`` alone), which are taken off, never read as a drain of ours.
``KubernetesDrainMarks`` is the ``KubernetesUnitSurvey`` a ``KubernetesUnitDrainer`` (``actuators.kubernetes_drain``)
builds on; the marks themselves are defined in ``actuators.drain_units``. A dry run's drainer makes this one write
and no other (``write_only_ended_marks``): the marks an ended drain left on a schedulable node are taken off, so a
later cordon of the node is not read as that drain by an agent switched back to enforce mode."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from datetime import datetime, timedelta

from actuators.drain_mark_names import (
    DRAIN_ANNOTATION,
    DRAIN_MARKS,
    FORCED_ANNOTATION,
    FORCED_AT_ANNOTATION,
    LEFT_DELETING_ANNOTATION,
    STARTED_AT_ANNOTATION,
)
from actuators.drain_survey import KubernetesUnitSurvey
from actuators.drain_units import DrainUnits, cordoned, drain_marks, ended_drains
from actuators.vendor_errors import from_kubernetes
from kube.api import KubernetesApi
from kube.models import V1Node
from models import ActuatorError
from models.clock import Clock
from models.errors import KubernetesApiError, KubernetesNotFound

log = logging.getLogger(__name__)


def started_mark(key: str, at: datetime) -> str:
    """The value of ``STARTED_AT_ANNOTATION`` for the drain with ``key`` whose timeout counts from ``at``."""
    return f"{at.isoformat()} {key}"


def drain_started(nodes: Sequence[V1Node], key: str, now: datetime) -> datetime | None:
    """When the drain with ``key`` of ``nodes`` started, as marked (``STARTED_AT_ANNOTATION``): the earliest mark of
    that drain on them, and never later than ``now`` (a clock ahead of this one's wrote it); None when none of them
    carries a mark of that drain that can be read (an earlier release writes none, or another drain's is left)."""
    starts = []
    for node in nodes:
        at, _, marked_key = ((node.metadata.annotations or {}).get(STARTED_AT_ANNOTATION) or "").partition(" ")
        if marked_key != key:
            continue
        try:
            start = datetime.fromisoformat(at)
        except ValueError:
            continue
        if start.tzinfo is not None:
            starts.append(min(start, now))
    return min(starts, default=None)


def forced_lately(nodes: Sequence[V1Node], now: datetime, within: timedelta) -> bool:
    """Whether a step of the forced drain of ``nodes`` ran ``within`` this long of ``now`` (``FORCED_AT_ANNOTATION``;
    none, or one that cannot be read, as an earlier release marks: not lately)."""
    for node in nodes:
        try:
            at = datetime.fromisoformat((node.metadata.annotations or {}).get(FORCED_AT_ANNOTATION) or "")
        except ValueError:
            continue
        if at.tzinfo is not None and now - within <= at <= now + within:
            return True
    return False


class KubernetesDrainMarks(KubernetesUnitSurvey):
    """Reads (and, where this replica may write, clears) the drain marks of a pool's units."""

    def __init__(
        self, api: KubernetesApi, clock: Clock, units: DrainUnits, accelerator_resources: Iterable[str] = ()
    ) -> None:
        super().__init__(api, clock, units, accelerator_resources)
        self._nodes_api = api.nodes
        self._ended: dict[str, set[str]] = {}  # unit -> keys of ended drains whose marks are still on its nodes
        self._may_write: Callable[[], bool] = lambda: True
        self._ended_marks_only = False
        self._left_marked: dict[str, dict[str, str]] = {}  # pool -> unit left deleting -> its drain's key, as last read

    def write_only_ended_marks(self) -> None:
        """Make this drainer's one write (a dry run's) the removal of our drain marks (the annotations only) from a
        node that is schedulable, where a person's ``kubectl uncordon`` ended the drain: no cordon, uncordon,
        eviction or removal, and no mark taken off a cordoned node. Left on, those marks would read as that drain in
        progress once anyone cordons the node again, to an agent switched back to enforce mode."""
        self._ended_marks_only = True

    def may_drain(self) -> bool:
        """Whether this drainer may write for a drain now (cordon, evict, remove): never for a dry run's."""
        return not self._ended_marks_only and self._may_write()

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

    def left_deleting(self, pool_id: str) -> Mapping[str, str]:
        """Units of the pool left cordoned by a drain that ended while the cloud still deleted them
        (``LEFT_DELETING_ANNOTATION`` on a cordoned node), with that drain's key, as the pool's units were last read
        (``draining_nodes``, at each tick): no read of its own. Such a mark on a node a person uncordoned is taken
        off when the node is read so; a unit with a drain of ours in progress (its key on a cordoned node) is never
        listed, whatever mark an earlier drain left on it: ended with that drain's key, the drain in progress would be
        undone."""
        return dict(self._left_marked.get(pool_id, {}))

    def _drains_of(self, pool_id: str) -> dict[str, tuple[str | None, Sequence[V1Node]]]:
        """Every unit of the pool (one read), with the key of our drain in progress on it (None: none) and its nodes.
        A drain whose marks are left on a node a person uncordoned has ended (``drain_units.ended_drains``): its
        marks are taken off every node of the unit that carries no other drain's (a cordon left as it is: it is
        someone else's now), and until they are gone (this replica may not write, or the patch failed) the drain's
        key is remembered as ended, so a later cordon of the node by anyone else is not taken over as ours."""
        drains: dict[str, tuple[str | None, Sequence[V1Node]]] = {}
        left: dict[str, str] = {}
        for unit, nodes in self._call(pool_id, lambda: self._units.of_pool(pool_id)).items():
            marked = {key for node in nodes for key in drain_marks(node).values()}
            ended = (self._ended.pop(unit, set()) | ended_drains(nodes)) & marked
            live = (drain_marks(n).get(DRAIN_ANNOTATION) for n in nodes if cordoned(n))
            key = next((k for k in live if k and k not in ended), None)
            # a unit with a drain of ours in progress is that drain's: an earlier drain's mark left on it is no watch
            if key is None and (left_key := next((k for n in nodes if cordoned(n) and (k := _left_mark(n))), None)):
                left[unit] = left_key
            stale = [
                node
                for node in nodes
                if ((marks := drain_marks(node)) and (not cordoned(node) or marks.get(DRAIN_ANNOTATION) in ended))
                or (_left_mark(node) and not cordoned(node))
            ]
            if stale and not self._unmark(pool_id, stale):
                self._ended[unit] = ended
            drains[unit] = (key, nodes)
        self._left_marked[pool_id] = left
        return drains

    def _unmark(self, pool_id: str, stale: Sequence[V1Node]) -> bool:
        """Take our drain marks off the ``stale`` nodes (not their cordon; a dry run's drainer only off those that are
        schedulable); False when not all of them were written."""
        if not self._may_write():
            return False
        nodes = [n.metadata.name for n in stale if not (self._ended_marks_only and cordoned(n))]
        try:
            for node in nodes:
                self._patch_node(pool_id, node, {"metadata": {"annotations": dict.fromkeys(DRAIN_MARKS)}})
        except ActuatorError as exc:  # remembered as ended meanwhile; read and cleared again next time
            log.warning(
                "pool %s: the marks of ended drains on %s could not be removed: %s; remove them by hand with "
                "kubectl annotate node NODE %s- %s- %s- %s- %s- (a dry-run agent's read-only role may not patch nodes)",
                pool_id,
                nodes,
                exc,
                *DRAIN_MARKS,
            )
            return False
        if nodes:
            log.info("pool %s: marks of drains that ended (uncordoned by a person) removed from %s", pool_id, nodes)
        return len(nodes) == len(stale)

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


def _left_mark(node: V1Node) -> str:
    """The key of the drain that left the node cordoned while the cloud deleted it (``LEFT_DELETING_ANNOTATION``)."""
    return (node.metadata.annotations or {}).get(LEFT_DELETING_ANNOTATION) or ""
