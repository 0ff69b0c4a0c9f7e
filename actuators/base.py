"""The interfaces between the agent and the infrastructure it changes.

Targets cross this boundary as absolute whole units with an idempotency key, never as deltas. Implementations
translate vendor errors into ``TransientActuatorError``, ``CapacityUnavailable`` or ``PermanentActuatorError``
(see ``models.errors``) and import no SDK type into their signatures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from datetime import timedelta
from typing import Protocol, runtime_checkable

from models import ActionResult, ActuatorError, PoolState


class Actuator(Protocol):
    def list_pools(self) -> Sequence[PoolState]:
        """Observed state of every pool this actuator manages."""
        ...

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        """Ask for ``to_units`` units in total. Repeating a key is a no-op that reports the first outcome.

        Any resize also removes the pool's failed units (``PoolState.failed_units``); one that asks for more than
        the target right after such a capacity failure raises ``CapacityUnavailable``.
        """
        ...


@runtime_checkable
class ReportsUnreadPools(Protocol):
    """An actuator that reads its pools apart: a pool whose read fails (a refused permission, a rate limit, an API
    that cannot be reached) is left out of ``list_pools``, so the planner holds it as unobserved, and reported here,
    so the agent alerts on it; the other pools are read and planned as usual."""

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        """The pools the latest ``list_pools`` left out because reading them failed, each with its error."""
        ...


def unread_pools(actuator: Actuator) -> Mapping[str, ActuatorError]:
    """The pools ``actuator``'s latest ``list_pools`` could not read; none for an actuator that does not say."""
    return actuator.unread_pools() if isinstance(actuator, ReportsUnreadPools) else {}


class NodeDrainer(Protocol):
    def idle_nodes(self, pool_id: str, idle_for: timedelta) -> Sequence[str]:
        """Nodes of the pool that ran no accelerator work for at least ``idle_for``."""
        ...

    def pool_nodes(self, pool_id: str) -> Sequence[str]:
        """Every node of the pool that is not cordoned, busy or idle, cheapest to lose first: idle nodes (longest
        idle first), then busy ones with the least accelerator work on them. A forced release (a budget's hard stop)
        drains from this order once no node is idle for the window any more."""
        ...

    def drain(self, pool_id: str, node: str, key: str, forced: bool = False) -> ActionResult:
        """Cordon the node and evict its pods, respecting disruption budgets. Only a ``forced`` drain (a budget's
        hard stop) drains a busy node: its pods go back to their controllers' queues. Any other drain is of a node
        found idle, and is rejected, nothing evicted, if it is found running accelerator work once cordoned (work
        scheduled on it since it was found idle). A drain continued with the same key (on a later tick, or by another
        agent that took it over) is as forced as its first step was."""
        ...

    def draining_nodes(self, pool_id: str) -> Mapping[str, str]:
        """Nodes of the pool with a drain started and not settled, each with its key, as the cluster records them
        (so a restarted or newly elected agent continues them instead of leaving nodes cordoned)."""
        ...

    def cancel(self, pool_id: str, node: str, key: str) -> ActionResult:
        """End the drain of the node with this key before it removes the node: uncordon it and remove the record of
        the drain, so it serves again at once (demand came back while it drained; it is booted, a new one is not).
        Pods already evicted are not brought back. DONE when the node serves again, REJECTED when there is no such
        drain to end (the node is gone, or was never drained)."""
        ...


@runtime_checkable
class TellsForcedDrains(Protocol):
    """A drainer that records on the cluster which drains in progress a forced release started
    (``KubernetesUnitDrainer``: the ``leadtime.io/drain-forced`` mark on their nodes), so an agent that takes the
    drains over (a restart, a new leader) can tell the releases of idle nodes, which it may end for a scale-up, from
    those of a budget's hard stop, which go on."""

    def unforced_drains(self, pool_id: str) -> Set[str]:
        """Nodes of the pool being drained (as ``draining_nodes`` names them) whose drain was not forced."""
        ...


def unforced_drains(drainer: NodeDrainer, pool_id: str) -> Set[str]:
    """The drains in progress of the pool that were not forced, as ``drainer`` records them; none for a drainer that
    does not say (every drain taken over from it is then taken as forced: it goes on)."""
    return drainer.unforced_drains(pool_id) if isinstance(drainer, TellsForcedDrains) else frozenset()


@runtime_checkable
class TellsHeldUnits(Protocol):
    """A drainer that keeps back idle units a drain could not empty (``drain_survey.KubernetesUnitSurvey``)."""

    def held_units(self, pool_id: str) -> Mapping[str, str]:
        """The pool's units idle for accelerators that its last survey did not offer as idle, and why."""
        ...

    def hold_rejected(self, pool_id: str, unit: str, why: str) -> None:
        """Hold ``unit``, whose drain was just rejected for ``why``, while the pods ``why`` names are unchanged."""
        ...


def held_units(drainer: NodeDrainer, pool_id: str) -> Mapping[str, str]:
    """``TellsHeldUnits.held_units`` of a drainer that keeps units back; none for one that does not."""
    return drainer.held_units(pool_id) if isinstance(drainer, TellsHeldUnits) else {}


def hold_rejected(drainer: NodeDrainer, pool_id: str, unit: str, why: str) -> None:
    """``TellsHeldUnits.hold_rejected`` of a drainer that keeps units back; nothing for one that does not."""
    if isinstance(drainer, TellsHeldUnits):
        drainer.hold_rejected(pool_id, unit, why)
