"""How a drainer's drain of a unit ends, and what it remembers of its drains: since when and under which key each
unit is drained, and each settled drain's result by its key (``KeyedResults``: a later call with the key answers it
again). A drain ends in one of these ways, each settled by its key:

- removed: the unit, empty (or, after the timeout, left only with pods a dead kubelet abandoned,
  ``pod_rules.abandoned``, or stuck terminating past their grace periods, ``pod_rules.stuck``), is deleted through
  the pool's ``NodeRemover`` and its nodes unmarked; not at the step that cordoned it, nor when a fresh read finds a
  pod bound to it since, which the drain's next step moves first. A removal the remover refuses for good, or that
  still fails after the timeout, uncordons the unit instead, but only when nothing of it went out: once a write of
  the removal was accepted (``actuators.write_window.writes_sent``: GKE took the deleteInstances, then its bounds'
  move failed) or the remover returned, the drain remembers the removal under its key, with the pods still
  terminating on the unit (``ActionResult.unfinished``), before anything else is written. A failure then, or at any
  later step with the key, is raised as transient (``maybe_applied``) whatever it is and the timeout: the unit on its
  way out is never uncordoned (nor its drain ended for a scale-up), the next step with the key goes straight to the
  removal again (the remover finds it under way) and unmarks the nodes, or finds the unit gone, and settles DONE
  with those pods, told once.
- rejected: no retry can finish it (a pod that must not be disrupted, accelerator work found on the cordoned unit, a
  remover that keeps the unit: ``KeepsUnits``); its nodes are uncordoned and unmarked. A forced drain taken over whose
  last step is older than the timeout and that finds accelerator work leaves the cordon as it is (it may be a
  person's maintenance cordon) and takes only our marks off.
- failed: still blocked or failing after the timeout; uncordoned.
- gone: its nodes left the cluster during the drain, settled DONE with nothing removed; or, when the removal went
  out at an earlier step of the drain (a write after it failed: the nodes' unmarking), settled DONE as removed by
  this drain, with the pods it remembered.

A node is cordoned and marked, or uncordoned and unmarked, here (``_cordon``), and a drain whose replica stopped
leading stops before its next eviction or removal (``_check_may_write``). ``KubernetesDrainEndings`` is the
``KubernetesDrainMarks`` a ``KubernetesUnitDrainer`` (``actuators.kubernetes_drain``) builds on: the steps of a drain
are the drainer's, and each ends through one of these."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from actuators.drain_marks import DRAIN_MARKS, FORCED_AT_ANNOTATION, KubernetesDrainMarks
from actuators.drain_units import DRAIN_ANNOTATION, FORCED_ANNOTATION, DrainUnits, KeepsUnits, NodeRemover
from actuators.idempotency import KeyedResults
from actuators.pod_rules import STUCK_AFTER, counts, terminating
from actuators.write_window import Writes, _sent, writes_sent
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


@dataclass(frozen=True)
class Removal:
    """A drain's removal that went out (``KubernetesDrainEndings._remove``): of ``unit``, with the pods still
    terminating on it then (``unfinished``); ``detail``: what the remover answered, "" when it raised after a write
    of the removal was accepted."""

    unit: str
    unfinished: tuple[UnfinishedPod, ...]
    detail: str = ""


@contextmanager
def _removal_writes() -> Iterator[Writes]:
    """The writes of a removal (``writes_sent``), counted in those of the drain's step too when the step counts
    them (``agent.drains``: whether a failed step may have been carried out)."""
    outer = _sent.get()
    inner = Writes()
    try:
        with writes_sent() as inner:
            yield inner
    finally:
        if outer is not None:
            outer.asked += inner.asked
            outer.accepted += inner.accepted
            outer.pending = inner.pending or outer.pending


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
        self._removing: dict[str, Removal] = {}  # drain key -> its removal that went out, until the key is settled

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

    def _cordon(self, pool_id: str, node: str, drain_key: str | None, forced: bool = False) -> V1Node | None:
        """Cordon and mark the node with the drain's key (and, ``forced``, as a forced drain's; a mark already there
        is left as it is), or (``None``) uncordon it and remove the marks; the node as patched, None when it is
        gone."""
        marks: dict[str, str | None] = {DRAIN_ANNOTATION: drain_key}
        if forced or not drain_key:
            stamp = self._clock.now().isoformat() if drain_key else None
            marks |= {FORCED_ANNOTATION: drain_key, FORCED_AT_ANNOTATION: stamp}
        body = {"spec": {"unschedulable": True if drain_key else None}, "metadata": {"annotations": marks}}
        return self._patch_node(pool_id, node, body)

    def _over_or_going(
        self, key: str, pool_id: str, unit: str, nodes: Sequence[str], overdue: bool
    ) -> ActionResult | None:
        """A step of a drain that has no more to drain on the unit (its ``nodes`` as found now): its nodes left the
        cluster (``_gone``), or its removal went out at an earlier step, which is asked for again (the remover finds
        it under way) and nothing evicted or given up (``_remove``); None for any other drain."""
        if not nodes and not self._units.removed_without_nodes:
            return self._gone(key, pool_id, unit)
        if (removal := self._removing.get(key)) is not None:
            return self._remove(key, pool_id, unit, nodes, removal.unfinished, overdue)
        return None

    def removal_went_out(self, key: str) -> Removal | None:
        """The removal of the drain with this key, when it went out and the key is not settled yet: the drain's next
        step goes straight to it (``_remove``), and the drain is never given up."""
        return self._removing.get(key)

    def _remove(
        self,
        key: str,
        pool_id: str,
        unit: str,
        nodes: Sequence[str],
        unfinished: tuple[UnfinishedPod, ...],
        overdue: bool,
    ) -> ActionResult:
        """The empty unit (or one left only with pods a dead kubelet abandoned, or stuck: ``unfinished``) goes,
        through the pool's actuator. Once a write of the removal was accepted, or the actuator returned, the removal
        is remembered under the key (with ``unfinished`` as they were then) before anything else is written: a
        failure from then on is raised as transient, never given up (``_went_out``)."""
        noun = self._units.noun
        self._check_may_write(pool_id, unit)
        earlier = self._removing.get(key)
        try:
            with _removal_writes() as writes:
                removed = self._remover.delete_nodes(pool_id, [unit], key)
        except ActuatorError as exc:  # e.g. a group at its minimum size, or a cloud API that keeps failing
            if earlier is not None or writes.accepted:  # it went out (now, or at an earlier step with the key)
                self._removing.setdefault(key, Removal(unit, unfinished))
                raise self._went_out(pool_id, unit, exc) from exc
            if isinstance(exc, PermanentActuatorError):
                self._give_up(pool_id, unit, nodes, f"the {noun} cannot be removed: {exc}")
                raise
            if not overdue:
                raise  # retried with the same key on the next tick
            why = f"removing the empty {noun} still fails after {self._timeout} ({exc})"
            return self._fail(key, pool_id, unit, nodes, why)
        removal = Removal(unit, unfinished if earlier is None else earlier.unfinished, removed.detail)
        self._removing[key] = removal  # before the writes below: a retry after their failure knows it went out
        for node in nodes:  # gone: unmarked too
            self._patch_node(pool_id, node, {"metadata": {"annotations": dict.fromkeys(DRAIN_MARKS)}})
        return self._removed(key, pool_id, removal)

    def _went_out(self, pool_id: str, unit: str, exc: ActuatorError) -> TransientActuatorError:
        """The error of a removal that failed after it went out: transient and ``maybe_applied`` whatever ``exc`` is
        (the unit is on its way out: not uncordoned), retried with the same key."""
        if isinstance(exc, TransientActuatorError) and exc.maybe_applied:
            return exc
        noun = self._units.noun
        why = f"{exc.reason}; the removal of {noun} {unit} went out, its drain goes on with the same key"
        return TransientActuatorError(pool_id, why, maybe_applied=True)

    def _removed(self, key: str, pool_id: str, removal: Removal, gone: bool = False) -> ActionResult:
        """The drain settled DONE by its removal, its result naming the pods still terminating on the unit then
        (``ActionResult.unfinished``); ``gone``: the unit left the cluster since the removal went out."""
        unit, noun = removal.unit, self._units.noun
        self._removing.pop(key, None)
        self._draining_since.pop(unit, None)
        self._idle_since.pop(unit, None)
        abandoned = [(p.namespace, p.name) for p in removal.unfinished if p.kubelet_gone]
        stuck = [(p.namespace, p.name) for p in removal.unfinished if not p.kubelet_gone]
        if abandoned or stuck:
            both = bool(abandoned) and bool(stuck)  # each kind named
            left = "left by a kubelet that is gone (its node's Ready condition Unknown) past their grace periods: "
            hung = "stuck terminating past their grace periods (seen terminating by this agent for longer than "
            kinds = [f"{abandoned} " * both + left + "nothing finishes them"] * bool(abandoned) + [
                f"{stuck} " * both + hung + f"their grace period and {STUCK_AFTER}: their kubelet did not finish them)"
            ] * bool(stuck)
            drained = f"{noun} {unit} removed with {abandoned + stuck} still terminating after {self._timeout}, "
            drained += "; ".join(kinds)
            log.warning("pool %s: %s (key %s)", pool_id, drained, key)
        else:
            drained = f"{noun} {unit} drained"
            log.info("pool %s: %s %s drained and removed (key %s)", pool_id, noun, unit, key)
        if gone:
            told = f"its removal by this drain went out ({removal.detail or 'a write of it was accepted'}), and it "
            told += "has left the cluster since"
        else:
            told = removal.detail
        detail = f"{drained}; {told}"
        result = ActionResult(key, pool_id, ActionStatus.DONE, self._clock.now(), detail, unfinished=removal.unfinished)
        return self._results.remember(result)

    def _gone(self, key: str, pool_id: str, unit: str) -> ActionResult:
        """The unit left the cluster during its drain: the drain is over, settled DONE (it is out of the pool, which
        is what the drain was for); nothing is removed through the pool's actuator. When the drain's removal went out
        at an earlier step (``_remove``), the unit was removed by this drain: so settled, with the pods it named."""
        if (removal := self._removing.get(key)) is not None:
            return self._removed(key, pool_id, removal, gone=True)
        self._draining_since.pop(unit, None)
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
        noun = self._units.noun
        log.warning("pool %s: drain of %s abandoned (%s); %s uncordoned", pool_id, unit, why, noun)

    def _result(self, key: str, pool_id: str, status: ActionStatus, detail: str) -> ActionResult:
        return ActionResult(key, pool_id, status, self._clock.now(), detail=detail)
