"""How a drainer's drain of a unit ends, and what it remembers of its drains: since when and under which key each
unit is drained, and each settled drain's result by its key (``KeyedResults``: a later call with the key answers it
again). A drain ends in one of these ways, each settled by its key:

- removed: the unit, empty (or, after the timeout, left only with pods a dead kubelet abandoned,
  ``pod_rules.abandoned``, or stuck terminating past their grace periods, ``pod_rules.stuck``), is deleted through
  the pool's ``NodeRemover`` and its nodes unmarked; not at the step that cordoned it, nor when a fresh read finds a
  pod bound to it since, which the drain's next step moves first. A removal the remover refuses for good, or that
  still fails after the timeout, uncordons the unit instead; but not one that failed past the timeout after it may
  have gone out (``TransientActuatorError.maybe_applied``: GKE took the deleteInstances, then answered 503 to the
  autoscaler bounds' move) when the remover tells what the cloud does with the unit (``TellsRemovals``) and the
  cloud, asked at once, is deleting it: the removal is remembered with its time, and each later step of the drain
  asks the cloud instead of draining. Being deleted, the unit stays cordoned and the step is STARTED; gone, the drain
  is settled DONE as removed (with the pods it left terminating); not being deleted (the cloud did not carry the
  deletion out), the drain is given up as at the timeout, the unit uncordoned. Still being deleted ``removal_wait``
  after the removal was sent (or unread then: as far as was read, it is going), the drain ends too (settled FAILED,
  ``unclear``) but the unit stays cordoned, the drain's marks replaced by one saying so
  (``drain_marks.LEFT_DELETING_ANNOTATION``, which whichever replica leads reads to watch it): it is on its way out,
  and the agent tells a person (``drain-deletion-overdue``). A unit
  removed whose nodes could not be unmarked is unmarked and settled at the drain's next step (``_unmark_step``), so
  the pods it left terminating are told once even when its nodes left the cluster meanwhile. A drain taken over
  (after a restart, or from another replica) knows nothing of a removal sent before: at its first step here the cloud
  is asked (``_taken_over_step``), and a unit it is deleting or done with is remembered as a removal that went out,
  with the pods terminating on it, and followed as above; nor is such a drain ended for a scale-up.
- rejected: no retry can finish it (a pod that must not be disrupted, accelerator work found on the cordoned unit, a
  remover that keeps the unit: ``KeepsUnits``); its nodes are uncordoned and unmarked. A forced drain taken over whose
  last step is older than the timeout and that finds accelerator work leaves the cordon as it is (it may be a
  person's maintenance cordon) and takes only our marks off.
- failed: still blocked or failing after the timeout; uncordoned.
- gone: its nodes left the cluster during the drain, settled DONE with nothing removed.

A node is cordoned and marked, or uncordoned and unmarked, here (``_cordon``), and a drain whose replica stopped
leading stops before its next eviction or removal (``_check_may_write``). ``KubernetesDrainEndings`` is the
``KubernetesDrainMarks`` a ``KubernetesUnitDrainer`` (``actuators.kubernetes_drain``) builds on: the steps of a drain
are the drainer's, and each ends through one of these."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol, runtime_checkable

from actuators.drain_mark_names import (
    DRAIN_ANNOTATION,
    DRAIN_MARKS,
    FORCED_ANNOTATION,
    FORCED_AT_ANNOTATION,
    LEFT_DELETING_ANNOTATION,
    STARTED_AT_ANNOTATION,
)
from actuators.drain_marks import KubernetesDrainMarks, started_mark
from actuators.drain_units import DrainUnits, KeepsUnits, NodeRemover
from actuators.idempotency import KeyedResults
from actuators.pod_rules import STUCK_AFTER, counts, kubelet_gone, pod_name, terminating
from kube.api import KubernetesApi
from kube.models import V1Node
from models import (
    ActionResult,
    ActionStatus,
    ActuatorError,
    PermanentActuatorError,
    TransientActuatorError,
    UnfinishedPod,
)
from models.clock import Clock

log = logging.getLogger("actuators.kubernetes_drain")  # the drainer's logger: its drains' endings log as they did

# What the cloud does with a unit whose removal went out: deleting it, done with it (gone from the pool), or keeping
# it (not being deleted: the deletion failed, or never reached it).
RemovalState = Literal["deleting", "gone", "kept"]
# The least a removal that went out is waited for (a VM's deletion takes minutes, its shutdown included); a drain
# timeout longer than this is waited for instead.
REMOVAL_WAIT = timedelta(minutes=15)


@runtime_checkable
class TellsRemovals(Protocol):
    """A ``NodeRemover`` that can tell what the cloud does with a unit whose removal it may have sent; asked to
    delete a unit it tells gone, it deletes nothing and finishes what follows a deletion (GKE's autoscaler bounds)."""

    def removal_state(self, pool_id: str, unit: str) -> RemovalState: ...


@dataclass(frozen=True)
class _Removal:
    """A removal of a drain's unit that failed past the timeout after it may have gone out: the drain's ``key`` and
    pool, when (``since``), the pods it left terminating (``unfinished``) and the failure (``why``). ``taken_over``:
    sent before this drainer took the drain over, and found under way then (``since``; ``why`` says what the cloud
    was doing with the unit)."""

    key: str
    pool_id: str
    since: datetime
    unfinished: tuple[UnfinishedPod, ...]
    why: str
    taken_over: bool = False

    @property
    def went_out(self) -> str:
        """The removal, in words."""
        if self.taken_over:
            return f"its removal went out before its drain was taken over at {self.since:%H:%M:%S}Z ({self.why})"
        return f"its removal was sent at {self.since:%H:%M:%S}Z and failed ({self.why})"

    @property
    def waited_from(self) -> str:
        """What the wait for the unit's deletion counts from, in words."""
        return "its drain was taken over" if self.taken_over else "its removal was sent"


class KubernetesDrainEndings(KubernetesDrainMarks):
    """The drains of a drainer whose units are found by ``units``: ``remover`` deletes a drained unit; a drain still
    blocked or failing ``timeout`` after its first step (by this drainer) gives up."""

    def __init__(
        self,
        api: KubernetesApi,
        clock: Clock,
        units: DrainUnits,
        remover: NodeRemover,
        timeout: timedelta,
        accelerator_resources: Iterable[str] = (),
    ) -> None:
        super().__init__(api, clock, units, accelerator_resources)
        self._remover = remover
        self._timeout = timeout
        self._draining_since: dict[str, tuple[str, datetime]] = {}  # unit -> (key, start) of its drain
        self._results = KeyedResults(settled_only=True)
        self._removing: dict[str, _Removal] = {}  # unit -> its drain's removal that may have gone out
        # unit -> the result of its drain's removal, settled once the unit's nodes are unmarked (``_unmark_step``)
        self._unmarking: dict[str, ActionResult] = {}
        # unit -> (pool, key, nodes as listed) of a drain in the cluster's record that this drainer did not start: at
        # its first step here the cloud is asked whether the unit's removal went out before (``_taken_over_step``)
        self._taken_over: dict[str, tuple[str, str, Sequence[V1Node]]] = {}
        # unit -> the key of the drain of it this drainer started (not one taken over), and of the drain whose removal
        # it asked for: a drain started here whose removal was never asked may be ended while the cloud cannot be read
        self._started_here: dict[str, str] = {}
        self._removal_asked: dict[str, str] = {}
        # What the cloud was found doing in this tick (since the pool's drains were last listed, ``draining_nodes``):
        # unit -> (pool, the answer) the agent had for a drain taken over (``removal_state``), which the drain's first
        # step here uses instead of reading the pool again; pool -> (a read of it that failed, the units that met it):
        # no other unit of the pool is read before the next tick (``_read_state``)
        self._answered: dict[str, tuple[str, RemovalState]] = {}
        self._unread: dict[str, tuple[ActuatorError, set[str]]] = {}
        self._removal_wait = max(timeout, REMOVAL_WAIT)

    def forget(self) -> None:
        """Forget what this drainer did with its drains (``agent.drains.ForgetsDrains``), as a fresh drainer knows
        nothing of them: the drains it started or took over, the removals it asked for and the cloud's answers of the
        tick. Its replica leads again after another may have led, which may have settled these drains or sent their
        removals: the drains still marked on their nodes are taken over again, the cloud asked about each, as after a
        restart. Kept: the removals that went out (``_removing``) and those whose nodes are not unmarked yet
        (``_unmarking``), which are listed (``draining_nodes``) and settled at their drains' next steps even when
        their nodes left the cluster before the other leader saw their drains (nothing in the cluster records them
        then); those the other leader settled are forgotten once the planner memory says so (``forget_settled``)."""
        self._draining_since.clear()
        self._taken_over.clear()
        self._started_here.clear()
        self._removal_asked.clear()
        self._answered.clear()
        self._unread.clear()

    def forget_settled(self, keys: Set[str]) -> None:
        """Forget the removals of the drains with these keys (``agent.drains.ForgetsDrains``): another leader settled
        them (the unit removed and its pods told, or the drain ended otherwise), so they are not settled again here."""
        for unit in [u for u, removal in self._removing.items() if removal.key in keys]:
            del self._removing[unit]
        for unit in [u for u, removed in self._unmarking.items() if removed.key in keys]:
            del self._unmarking[unit]

    def removal_state(self, pool_id: str, unit: str) -> RemovalState | None:
        """What the cloud does with ``unit`` (``TellsRemovals``): deleting it, done with it, or keeping it; None when
        the pool's remover cannot tell. A failed read raises (``ActuatorError``). What an agent taking the unit's drain
        over asks: the cloud's counts of the pool leave out a unit it is deleting or has deleted. The answer about a
        drain taken over is kept for the drain's first step here, in the same tick (``_taken_over_step``)."""
        if not isinstance(self._remover, TellsRemovals):
            return None
        state = self._read_state(self._remover, pool_id, unit, by_agent=True)
        if (taken := self._taken_over.get(unit)) is not None and taken[0] == pool_id:
            self._answered[unit] = (pool_id, state)
        return state

    def _read_state(self, remover: TellsRemovals, pool_id: str, unit: str, by_agent: bool = False) -> RemovalState:
        """What the cloud does with ``unit``: one read of the pool. Once a read of the pool failed in this tick (the
        cloud throttling the project answers every one so), the other units of the pool are not read before the next
        tick (``forget_reads``): asking about one raises that failure again, once, as a failed read of it would; each
        unit of the pool that met it is read again at its next step. A failure read for the agent (``by_agent``: at
        the tick's observation) is met by the unit's own first step too, which reads the pool no second time."""
        unread = self._unread.get(pool_id)
        if unread is not None and unit not in unread[1]:
            unread[1].add(unit)
            error = unread[0]
            why = f"{error.reason} (a read of the pool that failed in this tick; it is not read again before the next)"
            raise TransientActuatorError(pool_id, why)
        try:
            state = remover.removal_state(pool_id, unit)
        except ActuatorError as exc:
            self._unread[pool_id] = (exc, set() if by_agent else {unit})
            raise
        self._unread.pop(pool_id, None)
        return state

    def forget_reads(self, pool_id: str) -> None:
        """A new tick for the pool (its drains listed, ``draining_nodes``): what the cloud was found doing in the last
        one is not used any more."""
        self._unread.pop(pool_id, None)
        for unit in [u for u, (pool, _) in self._answered.items() if pool == pool_id]:
            del self._answered[unit]

    def _remove_settled(
        self,
        key: str,
        pool_id: str,
        unit: str,
        nodes: Sequence[str],
        unfinished: tuple[UnfinishedPod, ...],
        overdue: bool,
        started: bool,
        read_again: bool,
    ) -> ActionResult:
        """The unit is not removed at the step that cordoned it, even empty: the scheduler binds a pod it placed
        before the cordon without checking it (a volume to provision first delays that bind), so the pod would land on
        a unit being deleted. cluster-autoscaler waits ``--node-delete-delay-after-taint`` (5 s) and reads again; the
        drain's next step (a tick later) removes the unit if a fresh read of its pods (``read_again``: the step's own,
        after its evictions) still finds none to move. ``unfinished``: the pods still terminating on it after the
        timeout, those a dead kubelet abandoned and those stuck (``pod_rules.abandoned``, ``pod_rules.stuck``)."""
        if not nodes or (not started and (read_again or self._still_empty(pool_id, nodes))):
            return self._remove(key, pool_id, unit, nodes, unfinished, overdue)
        noun = self._units.noun
        if started:
            detail = f"{noun} {unit} cordoned and empty; removed at the drain's next step if its pods are still none"
        else:
            detail = f"pods were bound to {noun} {unit} since the last read; the drain's next step moves them"
        log.info("pool %s: %s (key %s)", pool_id, detail, key)
        return self._result(key, pool_id, ActionStatus.STARTED, detail)

    def _still_empty(self, pool_id: str, nodes: Sequence[str]) -> bool:
        """Whether a fresh read of the pods on ``nodes`` finds no pod the drain has to move that is not leaving."""
        on_nodes = self._pods_by_node(pool_id, nodes, fresh=True)
        return not any(counts(p) and not terminating(p) for name in nodes for p in on_nodes[name])

    def _kept(self, remover: KeepsUnits, pool_id: str, unit: str, members: Sequence[str]) -> str:
        """Why the pool's remover could not remove ``unit`` now, after the units of the pool whose drains are
        under way (a node cordoned and carrying our drain annotation: this release's earlier drains, and drains
        started before or taken over), which it removes first; "" when it could. One read of the pool's units. A
        remover that refuses the pool for good (GKE autoscaling on a pool it must not touch) raises: the drain's
        ``members`` are uncordoned first, as a drain taken over has them cordoned already."""
        draining = [other for other, (key, _) in self._drains_of(pool_id).items() if other != unit and key]
        try:
            return remover.kept_units(pool_id, [unit], draining)
        except PermanentActuatorError as exc:
            self._give_up(pool_id, unit, members, f"the {self._units.noun} cannot be removed: {exc}")
            raise

    def _reject_stale_forced(
        self, key: str, pool_id: str, unit: str, nodes: Sequence[str], working: Sequence[str]
    ) -> ActionResult:
        """A forced drain taken over whose last step is older than the timeout found accelerator work: not evicted.
        The cordon may be someone else's (a person uncordoned the drain and another cordoned the node while no agent
        ran), so it is left as it is: only our marks come off, and the warning says to uncordon it if it is ours."""
        self._check_may_write(pool_id, unit)
        for node in nodes:
            self._patch_node(pool_id, node, {"metadata": {"annotations": dict.fromkeys(DRAIN_MARKS)}})
        self._draining_since.pop(unit, None)
        noun = self._units.noun
        detail = (
            f"not continued as forced: no step of this forced drain ran in the last {self._timeout} (its marks may be "
            f"those of a drain a person ended), and {', '.join(working)} runs on {noun} {unit}; nothing evicted, the "
            f"marks removed and the cordon left as it is (it may be someone else's): uncordon {unit} if no one else "
            "cordoned it"
        )
        log.warning("pool %s: %s (key %s)", pool_id, detail, key)
        return self._results.remember(self._result(key, pool_id, ActionStatus.REJECTED, detail))

    def _cordon(
        self, pool_id: str, node: str, drain_key: str | None, forced: bool = False, since: datetime | None = None
    ) -> V1Node | None:
        """Cordon and mark the node with the drain's key (and, ``forced``, as a forced drain's; ``since``, with the
        time the drain's timeout counts from, ``STARTED_AT_ANNOTATION``; a mark already there is left as it is), or
        (``None``) uncordon it and remove the marks; the node as patched, None when it is gone. The mark of an earlier
        drain that left the node cordoned while the cloud deleted it (``LEFT_DELETING_ANNOTATION``, still there when
        its take-off failed after a person uncordoned the node) comes off in the same patch: the node is this drain's
        now, and the leader watching that mark would end this drain with the earlier one's key."""
        marks: dict[str, str | None] = {DRAIN_ANNOTATION: drain_key, LEFT_DELETING_ANNOTATION: None}
        if not drain_key:
            marks = dict.fromkeys(DRAIN_MARKS)
        if drain_key and forced:
            marks |= {FORCED_ANNOTATION: drain_key, FORCED_AT_ANNOTATION: self._clock.now().isoformat()}
        if drain_key and since is not None:
            marks[STARTED_AT_ANNOTATION] = started_mark(drain_key, since)
        body = {"spec": {"unschedulable": True if drain_key else None}, "metadata": {"annotations": marks}}
        return self._patch_node(pool_id, node, body)

    def _remove(
        self,
        key: str,
        pool_id: str,
        unit: str,
        nodes: Sequence[str],
        unfinished: tuple[UnfinishedPod, ...],
        overdue: bool,
    ) -> ActionResult:
        """The empty unit (or one left only with pods a dead kubelet abandoned, or stuck: ``unfinished``) goes, through
        the pool's actuator."""
        noun = self._units.noun
        self._check_may_write(pool_id, unit)
        self._removal_asked[unit] = key  # from here on it may go out, whatever the answer
        self._answered.pop(unit, None)  # what the cloud did with it before is no answer any more
        try:
            removed = self._remover.delete_nodes(pool_id, [unit], key)
        except ActuatorError as exc:  # e.g. a group at its minimum size, or a cloud API that keeps failing
            if isinstance(exc, PermanentActuatorError):
                self._give_up(pool_id, unit, nodes, f"the {noun} cannot be removed: {exc}")
                raise
            if not overdue:
                raise  # retried with the same key on the next tick
            if self._may_be_going(exc, pool_id, unit):
                # On its way out (GKE took the deleteInstances, then refused the bounds' move): uncordoned, it would
                # take pods while the cloud deletes it. The cloud is asked again at the drain's next steps.
                self._removing[unit] = _Removal(key, pool_id, self._clock.now(), unfinished, exc.reason)
                log.warning(
                    "pool %s: the removal of %s %s failed after it may have gone out (%s); it stays cordoned, and "
                    "the drain's next steps ask the cloud whether it is being deleted (key %s)",
                    pool_id, noun, unit, exc.reason, key,
                )  # fmt: skip
                raise
            why = f"removing the empty {noun} still fails after {self._timeout} ({exc})"
            return self._fail(key, pool_id, unit, nodes, why)
        return self._removed(key, pool_id, unit, nodes, unfinished, removed.detail)

    def _may_be_going(self, exc: ActuatorError, pool_id: str, unit: str) -> bool:
        """Whether the unit whose removal failed with ``exc`` past the timeout may be on its way out: the error says
        the removal may have been carried out (``maybe_applied``), the remover tells what the cloud does with the unit
        (``TellsRemovals``), and the cloud, asked at once, is deleting it or done with it, or cannot say now. A unit
        the cloud keeps (its deletion refused, e.g. deleteInstances itself answered 503) is not."""
        if not (isinstance(exc, TransientActuatorError) and exc.maybe_applied):
            return False
        if not isinstance(self._remover, TellsRemovals):
            return False
        try:
            return self._read_state(self._remover, pool_id, unit) != "kept"
        except ActuatorError as unread:  # asked again at the next steps
            log.warning(
                "pool %s: whether %s %s is being deleted is unknown: %s", pool_id, self._units.noun, unit, unread
            )
            return True

    def _removed(
        self,
        key: str,
        pool_id: str,
        unit: str,
        nodes: Sequence[str],
        unfinished: tuple[UnfinishedPod, ...],
        how: str,
    ) -> ActionResult:
        """The drain settled DONE by the removal of its unit (``how``, in words), its nodes unmarked; its result names
        the pods left terminating on it (``ActionResult.unfinished``). The unit is removed before its nodes are
        unmarked: when that fails, the step fails (transient, after its removal went out) and the result waits for the
        drain's next step (``_unmark_step``), which unmarks the nodes still there and settles it, so the pods it names
        are told once, even when the node and its pods left the cluster meanwhile."""
        noun = self._units.noun
        self._draining_since.pop(unit, None)
        self._idle_since.pop(unit, None)
        self._removing.pop(unit, None)
        abandoned = [(p.namespace, p.name) for p in unfinished if p.kubelet_gone]
        stuck = [(p.namespace, p.name) for p in unfinished if not p.kubelet_gone]
        if abandoned or stuck:
            both = bool(abandoned) and bool(stuck)  # each kind named
            gone = "left by a kubelet that is gone (its node's Ready condition Unknown) past their grace periods: "
            hung = "stuck terminating past their grace periods (seen terminating by this agent for longer than "
            kinds = [f"{abandoned} " * both + gone + "nothing finishes them"] * bool(abandoned) + [
                f"{stuck} " * both + hung + f"their grace period and {STUCK_AFTER}: their kubelet did not finish them)"
            ] * bool(stuck)
            drained = f"{noun} {unit} removed with {abandoned + stuck} still terminating after {self._timeout}, "
            drained += "; ".join(kinds)
            log.warning("pool %s: %s (key %s)", pool_id, drained, key)
        else:
            drained = f"{noun} {unit} drained"
            log.info("pool %s: %s %s drained and removed (key %s)", pool_id, noun, unit, key)
        result = ActionResult(
            key, pool_id, ActionStatus.DONE, self._clock.now(), f"{drained}; {how}", unfinished=unfinished
        )
        self._unmarking[unit] = result
        return self._unmark_step(key, pool_id, unit, nodes) or result

    def _unmark_step(
        self, key: str, pool_id: str, unit: str, nodes: Sequence[str] | None = None
    ) -> ActionResult | None:
        """The drain of a unit removed (``_removed``) whose nodes are not unmarked yet: their marks are taken off (a
        node gone needs none; ``nodes``: the unit's nodes, read when None) and its result settled. None when no such
        removal of this drain is remembered."""
        result = self._unmarking.get(unit)
        if result is None or result.key != key:
            return None
        if nodes is None:
            self._check_may_write(pool_id, unit)
            nodes = self._call(pool_id, lambda: self._units.nodes(pool_id, unit))
        for node in nodes:  # gone: unmarked too
            self._patch_node(pool_id, node, {"metadata": {"annotations": dict.fromkeys(DRAIN_MARKS)}})
        del self._unmarking[unit]
        self._removal_asked.pop(unit, None)  # removed: a unit of that name is not this drainer's to doubt again
        return self._results.remember(result)

    def _removal_step(
        self, key: str, pool_id: str, unit: str, known: RemovalState | None = None
    ) -> ActionResult | None:
        """A step of a drain whose removal may have gone out at an earlier step (``_remove``): nothing is drained, the
        cloud's state of the unit decides. Being deleted: STARTED, the unit left cordoned (unread: the step fails,
        transient, and the next one asks again); gone: DONE as removed; kept (the deletion failed): given up as at the
        timeout, the unit uncordoned; still being deleted ``removal_wait`` after the removal, or unread then: ended,
        the unit left cordoned (``_left_deleting``; a single failed read does not uncordon a unit the cloud may be
        deleting). ``known``: the state the step read already (``_taken_over_step``), not read again. None when no
        removal of this drain is remembered."""
        removal = self._removing.get(unit)
        if removal is None or removal.key != key or not isinstance(self._remover, TellsRemovals):
            self._removing.pop(unit, None)  # another drain's (the unit's drain ended since): not this one's
            return None
        noun = self._units.noun
        waited = self._clock.now() - removal.since
        late = waited >= self._removal_wait
        went_out = removal.went_out
        unread = ""
        try:
            state: RemovalState | None = known or self._read_state(self._remover, pool_id, unit)
        except ActuatorError as exc:
            if not late:
                why = f"whether {noun} {unit} is being deleted could not be read ({exc.reason}); {went_out}"
                raise TransientActuatorError(pool_id, why, maybe_applied=True) from exc
            state, unread = None, exc.reason
        members = self._call(pool_id, lambda: self._units.nodes(pool_id, unit))
        if state == "gone":
            self._check_may_write(pool_id, unit)
            try:  # nothing left to delete: what follows a deletion (GKE's autoscaler bounds) is asked for again
                then = self._remover.delete_nodes(pool_id, [unit], key).detail
            except ActuatorError as exc:  # the unit is gone all the same; left to the pool's next change
                then = f"what follows its deletion failed again ({exc.reason})"
            deleted = "the cloud has deleted it" if removal.taken_over else "the cloud deleted it since"
            how = f"{went_out}; {deleted}; {then}"
            return self._removed(key, pool_id, unit, members, removal.unfinished, how)
        if state == "kept":
            why = f"{went_out}, but the cloud is not deleting {noun} {unit} (its deletion failed)"
            return self._fail(key, pool_id, unit, members, why)
        if late:  # still being deleted, or unread: on its way out as far as was read
            return self._left_deleting(key, pool_id, unit, members, removal, waited, unread)
        detail = f"{noun} {unit} is being deleted by the cloud ({went_out}); it stays cordoned until it is gone"
        log.info("pool %s: %s (key %s)", pool_id, detail, key)
        return self._result(key, pool_id, ActionStatus.STARTED, detail)

    def _removal_known(self, unit: str, key: str) -> bool:
        """Whether a removal of the unit by the drain with this key is remembered: one that may have gone out
        (``_removing``), or one done whose nodes are not unmarked yet (``_unmarking``)."""
        removal, removed = self._removing.get(unit), self._unmarking.get(unit)
        return (removal is not None and removal.key == key) or (removed is not None and removed.key == key)

    def _taken_over_step(self, key: str, pool_id: str, unit: str) -> ActionResult | None:
        """The first step here of a drain taken over (``_taken_over``: after a restart, or from another replica), whose
        removal may have gone out before: nothing of it is remembered here. When the remover tells removals and the
        cloud is deleting the unit or done with it, the removal is remembered as one that went out (as the replica
        that sent it remembered it), with the pods terminating on its nodes, and the drain follows it
        (``_removal_step``): the unit stays cordoned, is listed after its nodes leave the cluster, and its removal's
        result names those pods, told once. None when the drain goes on as any drain: none taken over with this key,
        a remover that cannot tell, a unit the cloud keeps, or one it is done with and that has no pod terminating
        (nothing to wait for or tell: its removal answers it gone); or the cloud could not be asked (asked again at
        the drain's next step)."""
        taken = self._taken_over.get(unit)
        if taken is None or taken[1] != key or not isinstance(self._remover, TellsRemovals):
            self._taken_over.pop(unit, None)
            return None
        noun = self._units.noun
        answered = self._answered.pop(unit, None)  # the agent's, read in this tick for this drain
        try:
            if answered is not None and answered[0] == pool_id:
                state = answered[1]
            else:
                state = self._read_state(self._remover, pool_id, unit)
        except ActuatorError as exc:  # drained as any drain meanwhile
            log.warning(
                "pool %s: whether %s %s, whose drain was taken over, is being deleted is unknown: %s; asked again at "
                "the drain's next step (key %s)", pool_id, noun, unit, exc, key,
            )  # fmt: skip
            return None
        if state == "kept":
            del self._taken_over[unit]
            return None
        nodes = taken[2]
        on_nodes = self._pods_by_node(pool_id, [node.metadata.name for node in nodes], fresh=True)
        unfinished = tuple(
            UnfinishedPod(*pod_name(pod), node.metadata.name, kubelet_gone(node))
            for node in nodes
            for pod in on_nodes[node.metadata.name]
            if counts(pod) and terminating(pod)
        )
        if state == "gone" and not unfinished:  # nothing to wait for or tell: its removal answers the unit gone
            del self._taken_over[unit]
            return None
        doing = "deleting it" if state == "deleting" else "done with it"
        self._removing[unit] = _Removal(key, pool_id, self._clock.now(), unfinished, f"the cloud was {doing}", True)
        del self._taken_over[unit]
        log.warning(
            "pool %s: the drain of %s %s was taken over while the cloud was %s (its removal went out before); it "
            "stays cordoned, and the drain's next steps ask the cloud (key %s)", pool_id, noun, unit, doing, key,
        )  # fmt: skip
        return self._removal_step(key, pool_id, unit, state)

    def _left_deleting(
        self,
        key: str,
        pool_id: str,
        unit: str,
        nodes: Sequence[str],
        removal: _Removal,
        waited: timedelta,
        unread: str = "",
    ) -> ActionResult:
        """The cloud still deletes the unit ``removal_wait`` after its removal was sent, or what it does with it could
        not be read then (``unread``: why; the detail says so, and that it is taken as still being deleted): the
        drain ends, settled FAILED and ``unclear`` (the cloud may still carry the removal out), naming the pods it
        left terminating. The unit
        stays cordoned: uncordoned, the scheduler would place work on a machine on its way out. The drain's marks
        come off, so no replica takes the ended drain over, and the unit is marked as left so
        (``LEFT_DELETING_ANNOTATION``: ``left_deleting`` lists it to whichever replica leads); the agent tells a person
        what to check, and asks the cloud about the unit at its next steps: one the cloud keeps is uncordoned then
        (``cancel``, which ends a drain taken over, as this one is to it, once the cloud says it keeps the unit, and
        takes the mark off)."""
        self._check_may_write(pool_id, unit)
        left = dict.fromkeys(DRAIN_MARKS) | {LEFT_DELETING_ANNOTATION: key}  # whichever replica leads watches it
        for node in nodes:
            self._patch_node(pool_id, node, {"metadata": {"annotations": left}})
        self._draining_since.pop(unit, None)
        self._removing.pop(unit, None)
        noun = self._units.noun
        sent = (
            f"({removal.went_out})"
            if removal.taken_over
            else f"({removal.since:%H:%M:%S}Z, failed after it went out: {removal.why})"
        )
        if unread:
            seen = (
                f"what the cloud does with {noun} {unit} could not be read {waited} after {removal.waited_from} "
                f"{sent}, when the drain's wait for its deletion ({self._removal_wait}) ended ({unread}); taken as "
                "still being deleted, as its removal went out"
            )
        else:
            seen = (
                f"{noun} {unit} still being deleted {waited} after {removal.waited_from} {sent}, longer than the drain "
                f"waits for it ({self._removal_wait})"
            )
        detail = (
            f"{seen}; {noun} {unit} left cordoned (it may go at any time), the drain's marks replaced by "
            f"{LEFT_DELETING_ANNOTATION} (the leader asks the cloud about it at each tick)"
        )
        log.warning("pool %s: %s (key %s)", pool_id, detail, key)
        result = ActionResult(
            key, pool_id, ActionStatus.FAILED, self._clock.now(), detail, unclear=True, unfinished=removal.unfinished
        )
        return self._results.remember(result)

    def _removal_under_way(self, pool_id: str, unit: str, key: str) -> str:
        """Why the drain with this key cannot be ended now (``cancel``): its removal went out and the cloud is deleting
        the unit, or is done with it; "" when it can (no such removal, or the cloud kept the unit: forgotten). A drain
        taken over, of which nothing is remembered here, is ended only once the cloud says it keeps the unit: a unit it
        is deleting or done with (a Node object that outlives its instance) is on its way out, and one whose state
        cannot be read may be. A drain this drainer started, of a unit whose removal no drain of this drainer ever asked
        for (``_removal_asked``), is not on its way out by this agent's doing: when the cloud cannot be read, it is
        ended all the same (a read that failed once would otherwise buy a node while an idle one is drained). A unit
        whose removal an earlier drain asked for (one that ended leaving it cordoned while the cloud deleted it, and
        that a person uncordoned since) may still be going: its later drain goes on."""
        if (removed := self._unmarking.get(unit)) is not None and removed.key == key:
            return f"{self._units.noun} {unit} was removed by its drain; the drain is settled at its next step"
        if not isinstance(self._remover, TellsRemovals):
            return ""
        removal = self._removing.get(unit)
        if removal is None or removal.key != key:  # none remembered: a drain taken over after a restart or handover
            noun = self._units.noun
            try:
                state = self._read_state(self._remover, pool_id, unit)
            except ActuatorError as exc:  # it may be on its way out: ended once the cloud says it keeps it
                if self._started_here.get(unit) == key and unit not in self._removal_asked:
                    log.info(
                        "pool %s: whether the cloud deletes %s %s could not be read (%s); its drain, started here, "
                        "and no drain here ever asked for its removal: it may be ended (key %s)",
                        pool_id, noun, unit, exc.reason, key,
                    )  # fmt: skip
                    return ""
                return f"whether the cloud deletes {noun} {unit} could not be read ({exc.reason}); its drain goes on"
            if state == "kept":
                return ""
            doing = "is deleting" if state == "deleting" else "deleted"
            return f"the cloud {doing} {noun} {unit} (its removal went out before); its drain goes on"
        state = self._read_state(self._remover, pool_id, unit)
        if state == "kept":
            self._removing.pop(unit, None)
            return ""
        doing = "is deleting" if state == "deleting" else "deleted"
        return f"the removal of {self._units.noun} {unit} went out and the cloud {doing} it; its drain goes on"

    def _gone(self, key: str, pool_id: str, unit: str) -> ActionResult:
        """The unit left the cluster during its drain: the drain is over, settled DONE (it is out of the pool, which
        is what the drain was for); nothing is removed through the pool's actuator."""
        self._draining_since.pop(unit, None)
        self._removing.pop(unit, None)
        self._idle_since.pop(unit, None)
        noun = self._units.noun
        detail = f"{noun} {unit} is gone from the cluster (deleted outside this drain); nothing left to drain or remove"
        log.warning("pool %s: %s (key %s)", pool_id, detail, key)
        return self._results.remember(self._result(key, pool_id, ActionStatus.DONE, detail))

    def _check_may_write(self, pool_id: str, unit: str) -> None:
        if not self.may_drain():
            raise TransientActuatorError(
                pool_id, f"this replica stopped leading during the drain of {unit}; stopped before its next write"
            )

    def _reject(self, key: str, pool_id: str, unit: str, nodes: Sequence[str], why: str) -> ActionResult:
        """A drain no retry can finish: uncordon and settle the key REJECTED."""
        self._give_up(pool_id, unit, nodes, why)
        detail = f"{why}; {self._units.noun} {unit} uncordoned"
        return self._results.remember(self._result(key, pool_id, ActionStatus.REJECTED, detail))

    def _fail(self, key: str, pool_id: str, unit: str, nodes: Sequence[str], why: str) -> ActionResult:
        """A drain past its timeout: uncordon and settle the key FAILED."""
        self._give_up(pool_id, unit, nodes, why)
        detail = f"{why}; {self._units.noun} {unit} uncordoned"
        return self._results.remember(self._result(key, pool_id, ActionStatus.FAILED, detail))

    def _give_up(self, pool_id: str, unit: str, nodes: Sequence[str], why: str) -> None:
        for node in nodes:
            self._cordon(pool_id, node, None)  # a node gone meanwhile needs no uncordoning
        self._draining_since.pop(unit, None)
        self._removing.pop(unit, None)
        self._removal_asked.pop(unit, None)  # uncordoned to serve: the cloud keeps it, no removal of it is under way
        noun = self._units.noun
        log.warning("pool %s: drain of %s abandoned (%s); %s uncordoned", pool_id, unit, why, noun)

    def _result(self, key: str, pool_id: str, status: ActionStatus, detail: str) -> ActionResult:
        return ActionResult(key, pool_id, status, self._clock.now(), detail=detail)
