"""Scale-down through safe drains: the agent's side of a ``NodeDrainer``, for the pools one serves.

A real node pool must never shrink by a blind size change: the instance group would pick the victims, and their
pods would be killed without regard to disruption budgets. For a pool served by a drainer:

* **Observing** (every tick, before planning): the drainer's idle nodes become the pool's ``idle_units`` and
  ``idle_since`` (when this agent first saw each node idle), so the planner's rule "release only units observed
  idle for the stabilization window" holds on real pools. A pool whose idle nodes cannot be read has none (it is
  held, never shrunk on unknown idleness). Nodes being drained are taken out of the pool's ready and target
  units: they were already asked to go, so the planner does not release capacity twice for the same need. The
  cloud's own target still counts them until each drain removes its node, so a scale-up planned meanwhile is sent
  as the planned change applied to the cloud's target (``agent.executor``), never as the planned figure: a resize
  must not take out a node the drainer did not empty (the cloud would pick it, busy or not, with no eviction).
  When demand returns, the idle nodes this agent is draining are taken back first (``take_back``: the drain ended,
  the node uncordoned; it is booted and serves at once) and only the rest is bought, as many as fit under the
  pool's ``max_units`` while the draining nodes still count; the rest wait for the drains to end. A drain taken
  over from another agent (or from this one before a restart) is of idle nodes unless its nodes carry the mark of
  a forced drain (``TellsForcedDrains``), and is taken back the same way. Drains of a forced release go on, as do
  drains taken over from a drainer that does not tell them apart, or while their marks cannot be read (asked again
  every tick).
* **Acting** (in the executor): a planned release of ``k`` units drains the ``k`` nodes its decision record names
  (the planner chose them, longest idle first, from the nodes observed here), after checking that each is still idle
  for the stabilization window; if one is not, the release is refused and re-planned next tick. A release whose
  nodes the plan could not name drains the longest idle of the nodes idle for the window. Each drain has its own
  key; a drain that waits on a disruption budget is continued on later ticks with the same key until the drainer
  reports it done (the node is empty and was deleted through the pool's actuator), failed (timeout: uncordoned, not
  removed) or rejected (a pod must not be disrupted, or the node is no longer idle: the drainer checks again once
  the node is cordoned, on its pods read afresh, and work scheduled on it since the check here rejects the drain,
  uncordoned, nothing evicted; its idleness counts anew). A node whose drain failed or was rejected is not chosen again
  for one stabilization window. A drain rejected for its pods (one that must not be disrupted, one selected by two
  PodDisruptionBudgets) would be rejected again for as long as they stay: the drainer is told (``hold_rejected``) and
  holds the node back while the pods the rejection names are on it unchanged, as it holds back, unasked, an idle node
  with a pod that must not be disrupted. Each node a drainer holds back so is told, every tick, as a warning naming the
  node, the pods and why (``held_idle_alert``; the notifier sends it once per dedup window): an idle node that is
  still paid for, which only a person can free. A drain step that fails with an error a retry may fix, or a drain
  given up at the timeout (failing since it started), is reported in ``DrainOutcome.failing`` and a drain that
  removed its node in ``finished``: the executor alerts on a pool whose drains keep failing for its lead time. A
  drain that removed its node with pods still terminating (a dead kubelet's, or stuck on a live one: their work may
  be lost) adds a warning to ``DrainOutcome.alerts`` (``unfinished_pods_alert``), which the executor tells: once,
  from the step that removed the node. So does a drain that ended while the cloud still deleted its node (its
  removal went out, and the deletion outlasted the drain's wait: a FAILED result that is ``unclear``), its node left
  cordoned (``deletion_overdue_alert``). Such a node is marked so by the drainer, which lists it to whichever
  replica leads (``TellsLeftDeleting``), and remembered (``_left_deleting``) and the drainer asked, at
  each step, what the cloud does with it (``TellsRemovalStates``; one node per pool per step): gone, it is forgotten;
  kept (the cloud stopped deleting it, its instance runs again), its drain is ended (``NodeDrainer.cancel``: the node
  uncordoned, it serves again), logged, and the warning resolved (``deletion_stopped_alert``). Left cordoned, it
  would be paid for, counted as ready and never found idle. One a later drain of ours takes (a person uncordoned it)
  is that drain's: it is no longer asked about, nor listed by the drainer, whose cordon takes the mark off.
* **Forced releases** (``Resize.forced``, a budget's hard stop: the money left no longer pays for the units held)
  are never refused for busy nodes. They drain the named nodes that are still in the pool, then nodes idle for the
  window, then the pool's other nodes in the drainer's order, cheapest to lose first
  (``NodeDrainer.pool_nodes``: idle before busy), until ``from_units - to_units`` nodes are draining; nodes
  already draining or held after a failed drain are skipped. Each busy node drained is logged as a warning; its
  pods are evicted like any other (disruption budgets still hold, a blocked drain goes on every tick, a pod that
  must not be disrupted still rejects the drain) and their work goes back to the queue.

The cluster's record of drains in progress (``NodeDrainer.draining_nodes``) is read every tick and wins over this
memory: a restarted or newly elected agent takes over drains another one started, so no node is left cordoned; a
drain remembered under another key than the one the record shows for its node (it ended elsewhere, and another drain
of the node started since) is forgotten and the record's drain taken over, never stepped or ended under the old key. A
drain whose removal the cloud took is not taken out of its pool's units again (the cloud's target and ready units
leave its node out already): known from the failed step that sent it, or, for a drain taken over, from the drainer
(``TellsRemovalStates``: the cloud is deleting its node, or has deleted it), asked once when it is taken over (again
at the next ticks while it cannot say).
A drainer that sends nothing (dry-run mode, ``actuators.dry_run.sends_drains``) cannot continue them, nor end one at
the drain timeout: the drains an agent in enforce mode left behind (the Deployment switched back to dry-run while a
disruption budget held one up) are left alone, their nodes counted as the cloud reads them (cordoned, not gone:
nothing will remove them), never chosen for a drain, and a warning per node, raised every tick while the cluster
records the drain, says to let the drain finish in enforce mode or to uncordon the node and remove its drain marks.
Nor does it watch the nodes such an agent left cordoned while the cloud deleted them (``TellsLeftDeleting``: it asks
the cloud nothing and uncordons none): a warning per node so marked, raised every tick while it stays cordoned
(``left_deleting_alert``), says to uncordon it and remove the mark if the cloud no longer deletes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Literal, Protocol, runtime_checkable

from actuators.base import NodeDrainer, held_units, hold_rejected, unforced_drains
from actuators.dry_run import sends_drains
from actuators.write_window import Writes, writes_sent
from agent.drain_records import (
    IDLE_UNREAD,
    DrainOutcome,
    PendingDrain,
    SettledDrains,
    deletion_stopped_alert,
    held_idle_alert,
    idle_nodes_alert,
    left_cordoned_alert,
    left_deleting_alert,
    unfinished_pods_alert,
)
from models import (
    ActionResult,
    ActionStatus,
    ActuatorError,
    AlertEvent,
    AlertKind,
    PermanentActuatorError,
    PoolState,
    Resize,
    Severity,
    drain_key,
)
from models.durations import format_duration

log = logging.getLogger(__name__)
_SETTLED = (ActionStatus.DONE, ActionStatus.FAILED, ActionStatus.REJECTED, ActionStatus.RECORDED)


@runtime_checkable
class TellsRemovalStates(Protocol):
    """A drainer that tells what the cloud does with a unit whose removal may have gone out
    (``actuators.kubernetes_drain.KubernetesUnitDrainer``, over a remover that can tell it, such as GKE's)."""

    def removal_state(self, pool_id: str, unit: str) -> Literal["deleting", "gone", "kept"] | None:
        """The cloud is deleting the unit, is done with it (gone from the pool), or keeps it; None when the drainer
        cannot tell. A failed read raises ``ActuatorError``."""
        ...


def removal_state(drainer: NodeDrainer, pool_id: str, unit: str) -> Literal["deleting", "gone", "kept"] | None:
    """``TellsRemovalStates.removal_state`` of a drainer that tells it; None for one that does not."""
    return drainer.removal_state(pool_id, unit) if isinstance(drainer, TellsRemovalStates) else None


@runtime_checkable
class TellsLeftDeleting(Protocol):
    """A drainer that marks the units its drains left cordoned while the cloud still deleted them, and lists them
    (``actuators.drain_marks``), so whichever replica leads asks the cloud about them."""

    def left_deleting(self, pool_id: str) -> Mapping[str, str] | None:
        """The pool's units so marked, each with the key of the drain that left it, as its drains were last listed
        (``NodeDrainer.draining_nodes``); None when the drainer cannot tell (a wrapper's, around one that does not)."""
        ...


def left_deleting(drainer: NodeDrainer, pool_id: str) -> Mapping[str, str] | None:
    """``TellsLeftDeleting.left_deleting`` of a drainer that tells it; None for one that does not."""
    return drainer.left_deleting(pool_id) if isinstance(drainer, TellsLeftDeleting) else None


@runtime_checkable
class ForgetsDrains(Protocol):
    """A drainer that remembers what a leader did with its drains (``actuators.drain_endings``: a removal that went
    out, one whose nodes are not unmarked yet, the drains it started), which a replica forgets when it leads again
    after another replica may have led (``NodeDrains.forget``), all but its removals: those it forgets only once the
    other leader is known to have settled their drains (``forget_settled``)."""

    def forget(self) -> None:
        """Forget all but the removals that went out and those whose nodes are not unmarked yet."""
        ...

    def forget_settled(self, keys: Set[str]) -> None:
        """Forget the removals of the drains with these keys (settled by another leader)."""
        ...


class NodeDrains:
    """``drainers`` maps each pool that shrinks through drains to its drainer."""

    def __init__(self, drainers: Mapping[str, NodeDrainer], stabilization: timedelta) -> None:
        self._drainers = dict(drainers)
        self._window = stabilization
        self._first_idle: dict[str, dict[str, datetime]] = {}  # pool -> node -> first seen idle
        self._pending: dict[str, PendingDrain] = {}  # node -> drain in progress
        self._held_until: dict[str, datetime] = {}  # node -> not chosen again before this time
        self._unsure: set[str] = set()  # drains taken over not yet known to be forced or not
        self._left: dict[str, PendingDrain] = {}  # node -> drain the cluster records that a dry run cannot continue
        # node -> the drain that left it cordoned while the cloud deleted it, as its mark says, which a dry run warns
        # about and leaves as it is (``_leave_left_deleting``)
        self._left_unwatched: dict[str, PendingDrain] = {}
        self._held: dict[str, tuple[str, str]] = {}  # idle node a drainer holds back -> (pool, why), as last logged
        # keys of drains whose removal the cloud took (a write of it accepted, a later one failing; for a drain taken
        # over, its node being deleted or gone when asked): the cloud's target and ready units already leave the node
        # out, so ``adjusted`` takes it out no second time (that bought a node); a removal only maybe sent (no answer, a
        # 503 to the delete itself) is taken out as any drain
        self._removal_sent: set[str] = set()
        self._unasked: set[str] = set()  # drains taken over whose node the cloud was not asked about yet
        # node -> the drain that ended leaving it cordoned while the cloud still deleted it, in the order asked about
        # (``_left_deleting_step``): kept by the cloud since, it is uncordoned
        self._left_deleting: dict[str, PendingDrain] = {}
        # node -> pool of those the cloud was found done with while their marks still list them (a Node object that
        # outlives its instance): not asked about again
        self._left_gone: dict[str, str] = {}
        # the drains taken over that this replica's steps settled, and those the planner memory says a leader settled
        # (``settled``)
        self._settled = SettledDrains()
        # forgotten (``forget``) and the planner memory not recalled since: the drainers still remember their removals
        self._recall_pending = False

    def serves(self, pool_id: str) -> bool:
        return pool_id in self._drainers

    def forget(self) -> None:
        """Forget what this replica did with drains while it led, as a fresh replica has nothing of it: called when it
        leads again in a new term, after which another replica may have led (the daemon's resume; never for a late
        renewal of its own lease, after which its memory is still the truth). Forgotten: the drains in progress, the
        removals the cloud took, the nodes left cordoned while the cloud deleted them, and each drainer's own memory
        of them (``ForgetsDrains``) but its removals that went out (and those whose nodes are not unmarked yet). The
        drains still in the cluster's record are taken over from their nodes' marks at the next observation, the cloud
        asked about each, as after a restart: a drain another leader settled meanwhile (its pods told, the autoscaler
        bounds moved) is neither settled nor told again here, and one whose removal another leader sent is not ended
        for a scale-up while the cloud may be deleting its node. A removal this replica sent is listed by its drainer,
        and so settled here, even when its node left the cluster before another leader saw its drain (the warning
        about its pods and the autoscaler bounds' move would be lost), unless the planner memory, once recalled
        (``recall_settled``, before this replica's drains take a step), says another leader settled it."""
        self._recall_pending = True
        self._pending.clear()
        self._removal_sent.clear()
        self._unasked.clear()
        self._unsure.clear()
        self._left.clear()
        self._left_unwatched.clear()
        self._left_deleting.clear()
        self._left_gone.clear()
        for drainer in {id(d): d for d in self._drainers.values()}.values():
            if isinstance(drainer, ForgetsDrains):
                drainer.forget()

    def settled(self, now: datetime) -> dict[str, dict[str, datetime]]:
        """The drains taken over that were settled, the latest ``drain_records.SETTLED_KEPT`` (``SettledDrains``), per
        pool, each key with when: what the planner memory carries to the next leader
        (``PlannerMemory.drains_settled``). ``now``, when the memory is saved, bounds nothing: the record is bounded
        by count, never by age."""
        return self._settled.record()

    def recall_settled(self, record: Mapping[str, Mapping[str, datetime]]) -> None:
        """The drains a leader settled, as the planner memory says at this replica's first read of it in a term
        (``PlannerMemory.drains_settled``), are known settled here too (and carried on with this replica's own). After
        a ``forget``, each drainer forgets the removals of those drains (``ForgetsDrains.forget_settled``): another
        leader settled them, whose warning and autoscaler bounds' move are not to be told and asked for again."""
        self._settled.recall(record)
        if not self._recall_pending:
            return
        self._recall_pending = False
        keys = self._settled.keys()
        for drainer in {id(d): d for d in self._drainers.values()}.values():
            if isinstance(drainer, ForgetsDrains):
                drainer.forget_settled(keys)

    @property
    def pending(self) -> tuple[PendingDrain, ...]:
        return tuple(self._pending.values())

    # -- observing ---------------------------------------------------------------------------------------------
    def observe(
        self, states: Mapping[str, PoolState], now: datetime
    ) -> tuple[dict[str, PoolState], tuple[AlertEvent, ...]]:
        """The states the planner should see: idle nodes filled in, nodes being drained taken out."""
        self._held_until = {n: t for n, t in self._held_until.items() if t > now}
        alerts: list[AlertEvent] = []
        for pool_id, drainer in self._drainers.items():
            try:
                if sends_drains(drainer):
                    self._reconcile(pool_id, drainer.draining_nodes(pool_id))
                    self._watch_left(pool_id, left_deleting(drainer, pool_id))
                else:
                    self._leave(pool_id, drainer.draining_nodes(pool_id))
                    self._leave_left_deleting(pool_id, left_deleting(drainer, pool_id))
            except ActuatorError as exc:  # drains in progress stay as remembered; continuing them will tell
                log.warning("pool %s: drains in progress unknown: %s", pool_id, exc)
        alerts.extend(left_cordoned_alert(now, left) for _, left in sorted(self._left.items()))
        alerts.extend(left_deleting_alert(now, left) for _, left in sorted(self._left_unwatched.items()))
        seen = self.adjusted(states)
        for pool_id, drainer in self._drainers.items():
            state = seen.get(pool_id)
            if state is None:
                continue
            try:
                idle = [n for n in drainer.idle_nodes(pool_id, timedelta(0)) if self._choosable(n)]
                alerts.extend(self._held_back(pool_id, held_units(drainer, pool_id), now))
            except ActuatorError as exc:
                log.warning("pool %s: idle nodes unknown, not shrunk for idleness: %s", pool_id, exc)
                alerts.append(idle_nodes_alert(now, pool_id, IDLE_UNREAD, exc))
                idle = []
            known = self._first_idle.get(pool_id, {})
            self._first_idle[pool_id] = {node: known.get(node, now) for node in idle}
            longest_first = sorted(self._first_idle[pool_id].items(), key=lambda item: (item[1], item[0]))
            since = tuple(first for _, first in longest_first)
            nodes = tuple(node for node, _ in longest_first)
            seen[pool_id] = replace(state, idle_units=len(idle), idle_since=since, idle_nodes=nodes)
        return seen, tuple(alerts)

    def adjusted(self, states: Mapping[str, PoolState]) -> dict[str, PoolState]:
        """Pool states with the nodes being drained taken out of ready and target units (no calls), and counted in
        ``draining_units``: billed until each drain deletes its node. Those of them a scale-up would take back (the
        drains of idle nodes, ``take_back``) are counted in ``takeable_units`` too."""
        draining: dict[str, int] = {}
        idle: dict[str, int] = {}
        self._removal_sent &= {pending.key for pending in self._pending.values()}
        for pending in self._pending.values():
            if pending.key in self._removal_sent:
                continue  # the cloud took its removal: its target and ready units no longer count the node
            draining[pending.pool_id] = draining.get(pending.pool_id, 0) + 1
            idle[pending.pool_id] = idle.get(pending.pool_id, 0) + pending.idle
        out = dict(states)
        for pool_id, count in draining.items():
            state = out.get(pool_id)
            if state is not None:
                target = max(0, state.target_units - count)
                out_of_target = state.target_units - target
                out[pool_id] = replace(
                    state,
                    ready_units=max(0, state.ready_units - count),
                    target_units=target,
                    draining_units=state.draining_units + out_of_target,
                    takeable_units=state.takeable_units + min(idle[pool_id], out_of_target),
                )
        return out

    # -- acting (called by the executor only) ------------------------------------------------------------------
    def continue_pending(self, now: datetime, into: DrainOutcome | None = None) -> DrainOutcome:
        """Carry every drain in progress one step further, with its own key; each step's outcome is added to
        ``into`` (a new one by default) as it is had. Then the nodes left cordoned by drains that ended while the
        cloud still deleted them are asked about (``_left_deleting_step``)."""
        outcome = DrainOutcome() if into is None else into
        for pending in list(self._pending.values()):
            self._step_into(outcome, pending, now)
        self._left_deleting_step(outcome, now)
        return outcome

    def scale_down(
        self, resize: Resize, now: datetime, nodes: Sequence[str] = (), into: DrainOutcome | None = None
    ) -> DrainOutcome:
        """Release ``from_units - to_units`` units of the pool by draining as many nodes idle for the window.

        ``nodes`` are the nodes the plan chose: exactly those are drained, after checking that every one is still
        idle for the window and not already draining; if one is not, the release is refused as a whole (the next
        tick plans on fresh state). Without ``nodes`` (the plan could not name them), the longest idle are taken.
        A forced release is never refused for busy nodes (``_forced_choice``). Each drain's outcome is added to
        ``into`` (a new one by default) as it is had: an error no drainer translates, raised by a later node's drain,
        leaves there the drains started before it, and a failed result of the node whose drain raised, which may
        have begun it (``ActionResult.unclear``: it stays in progress, continued next tick).
        """
        outcome = DrainOutcome() if into is None else into
        pool_id = resize.pool_id
        wanted = resize.from_units - resize.to_units
        try:
            idle = self._drainers[pool_id].idle_nodes(pool_id, self._window)
            forced = self._forced_choice(pool_id, wanted, nodes, idle) if resize.forced else None
        except ActuatorError as exc:
            outcome.extend(self._failed(resize.key, pool_id, now, exc))
            return outcome
        if forced is not None:
            if 0 < len(forced[0]) < wanted:
                log.warning(
                    "pool %s: forced release of %d nodes finds only %d to drain (the others are draining, held after "
                    "a failed drain or cordoned)", pool_id, wanted, len(forced[0]),
                )  # fmt: skip
            self._start(outcome, resize, now, *forced)
            return outcome
        if nodes:
            gone = [n for n in nodes if n not in idle or not self._choosable(n)]
            if gone:
                detail = (
                    f"planned to drain {', '.join(nodes)} but {', '.join(gone)} of {pool_id} is no longer idle for "
                    f"{format_duration(self._window)} (or already draining); re-planning next tick"
                )
                outcome.results.append(ActionResult(resize.key, pool_id, ActionStatus.REJECTED, now, detail))
                return outcome
        self._start(outcome, resize, now, list(nodes) or [n for n in idle if self._choosable(n)][:wanted], set())
        return outcome

    def _forced_choice(
        self, pool_id: str, wanted: int, named: Sequence[str], idle: Sequence[str]
    ) -> tuple[list[str], set[str]]:
        """The ``wanted`` nodes a forced release drains, and which of them are busy: the named nodes still in the
        pool, then the nodes idle for the window, then the pool's other nodes, cheapest to lose first. Nodes already
        draining or held after a failed drain are skipped. The pool is read again only when the nodes idle for the
        window do not cover the release."""
        chosen = _first(wanted, [n for n in named if n in idle], idle, self._choosable)
        if len(chosen) == wanted and set(named) <= set(idle):
            return chosen, set()
        drainer = self._drainers[pool_id]
        present = drainer.pool_nodes(pool_id)
        still_there = [n for n in named if n in idle or n in present]  # not gone, not cordoned by a person
        chosen = _first(wanted, still_there, [*idle, *present], self._choosable)
        if set(chosen) <= set(idle):
            return chosen, set()
        idle_now = set(drainer.idle_nodes(pool_id, timedelta(0)))  # idle, if not yet for the window
        return chosen, {n for n in chosen if n not in idle_now}

    def _start(
        self, outcome: DrainOutcome, resize: Resize, now: datetime, chosen: Sequence[str], busy: set[str]
    ) -> None:
        pool_id = resize.pool_id
        if not chosen:
            detail = (
                f"no node of {pool_id} can be drained (all are draining or held after a failed drain); re-planning"
                if resize.forced
                else f"no node of {pool_id} is idle for {format_duration(self._window)} any more; re-planning"
            ) + " next tick"
            outcome.results.append(ActionResult(resize.key, pool_id, ActionStatus.REJECTED, now, detail))
            return
        for node in chosen:
            key = drain_key(resize.key, node)
            pending = PendingDrain(pool_id, node, key, idle=not resize.forced, started=now, forced=resize.forced)
            self._pending[node] = pending
            if node in busy:
                log.warning("draining busy node %s of pool %s: %s", node, pool_id, resize.reason)
            else:
                log.info("pool %s: draining idle node %s (%s)", pool_id, node, resize.reason)
            self._step_into(outcome, pending, now)
            if pool_id in outcome.permanent:
                break

    def _step_into(self, outcome: DrainOutcome, pending: PendingDrain, now: datetime) -> None:
        """``_step``, its outcome added to ``outcome``; an error it raises (none a drainer translates) adds a failed
        result of the drain first, whose outcome is not known (``unclear``): it may have begun, and goes on."""
        try:
            outcome.extend(self._step(pending, now))
        except Exception as exc:
            error = f"drain of {pending.node}: {str(exc) or type(exc).__name__}"
            outcome.results.append(
                ActionResult(pending.key, pending.pool_id, ActionStatus.FAILED, now, error=error, unclear=True)
            )
            raise

    def take_back(self, pool_id: str, count: int, now: datetime) -> list[str]:
        """End up to ``count`` drains of idle nodes of the pool (the latest started or taken over first) so they
        serve again, instead of buying as many new nodes for a scale-up: they are booted and serve at once. Returns
        the nodes taken back; a drain that cannot be ended goes on (and its node is bought anew)."""
        taken: list[str] = []
        mine = [p for p in self._pending.values() if p.pool_id == pool_id and p.idle]
        for pending in reversed(mine):
            if len(taken) == count:
                break
            try:
                result = self._drainers[pool_id].cancel(pool_id, pending.node, pending.key)
            except ActuatorError as exc:
                log.warning("pool %s: the drain of %s could not be ended, it goes on: %s", pool_id, pending.node, exc)
                break
            if result.status is not ActionStatus.DONE:
                log.info("pool %s: the drain of %s goes on: %s", pool_id, pending.node, result.detail)
                continue
            del self._pending[pending.node]
            taken.append(pending.node)
        return taken

    # -- internals -----------------------------------------------------------------------------------------
    def _held_back(self, pool_id: str, held: Mapping[str, str], now: datetime) -> list[AlertEvent]:
        """A warning per idle node of the pool its drainer holds back; logged when it is first held (or for another
        reason), and when it is held no more."""
        for node in [n for n, (pool, _) in self._held.items() if pool == pool_id and n not in held]:
            log.info("pool %s: node %s is no longer held back from drains", pool_id, node)
            del self._held[node]
        for node, why in sorted(held.items()):
            if self._held.get(node) != (pool_id, why):
                log.warning("pool %s: idle node %s is not offered for a drain: %s", pool_id, node, why)
            self._held[node] = (pool_id, why)
        return [held_idle_alert(now, pool_id, node, why) for node, why in sorted(held.items())]

    def _reconcile(self, pool_id: str, draining: Mapping[str, str]) -> None:
        """The cluster's record of drains in progress wins: take over the ones another agent (or this one before
        a restart) started, forget the ones that ended elsewhere (a person uncordoned the node, it is gone). A drain
        taken over whose nodes carry no mark of a forced drain is a release of idle nodes: it may be taken back. A
        drain remembered here whose node the record shows under another key ended elsewhere, and another drain of the
        node started since (by another replica, while this one did not lead or could not read the pool's drains):
        that one is taken over as any other (``_replaced``), never continued, ended or asked about under the old key,
        whose steps would mark the node with it again, with the old drain's forced or idle state."""
        for node, key in draining.items():
            if (known := self._pending.get(node)) is not None and known.key != key:
                self._replaced(pool_id, known, key)
            if node not in self._pending:
                log.info("pool %s: taking over the drain of %s (key %s)", pool_id, node, key)
                self._pending[node] = PendingDrain(pool_id, node, key)
                self._unsure.add(node)
                self._unasked.add(node)
        for node, pending in list(self._pending.items()):
            if pending.pool_id == pool_id and node not in draining:
                log.info(
                    "pool %s: the drain of %s is no longer in the cluster's record (its node uncordoned or its marks "
                    "taken off by someone else, or the node gone): forgotten without a result (key %s)",
                    pool_id, node, pending.key,
                )  # fmt: skip
                del self._pending[node]
        self._unsure.intersection_update(self._pending)
        self._unasked.intersection_update(self._pending)
        self._ask_removals(pool_id)
        asking = sorted(n for n in self._unsure if self._pending[n].pool_id == pool_id)
        if not asking:
            return
        try:
            unforced = unforced_drains(self._drainers[pool_id], pool_id)
        except ActuatorError as exc:  # taken back only once known not forced
            log.warning("pool %s: whether the drains of %s were forced is unknown: %s", pool_id, ", ".join(asking), exc)
            return
        self._unsure -= set(asking)
        for node in asking:
            if node in unforced:
                self._pending[node] = replace(self._pending[node], idle=True)

    def _replaced(self, pool_id: str, old: PendingDrain, key: str) -> None:
        """Forget the drain ``old``, whose node the cluster's record shows drained under ``key`` now, and what is
        remembered of it alone: its place among the drains in progress, whether it was forced or of idle nodes (the
        take-over asks again), and whether the cloud took its removal (asked again of the new drain). Nothing else
        here is the old drain's: a node is held (``_held_until``) after a drain of it settled, never while one is in
        progress; the nodes first seen idle leave out those being drained; the nodes a drainer holds back are its
        own; and a mark an earlier drain left on the node (``_left_deleting``) is forgotten once a drain of ours
        owns the node."""
        log.info(
            "pool %s: node %s is drained under key %s in the cluster's record, no longer under key %s as remembered "
            "here: that drain ended elsewhere; the new one is taken over", pool_id, old.node, key, old.key,
        )  # fmt: skip
        del self._pending[old.node]
        self._removal_sent.discard(old.key)
        self._unsure.discard(old.node)
        self._unasked.discard(old.node)

    def _watch_left(self, pool_id: str, marked: Mapping[str, str] | None) -> None:
        """The pool's nodes left cordoned while the cloud deleted them, as their marks list them (``marked``,
        ``TellsLeftDeleting``; None: the drainer cannot tell): one another replica left, or this one before a restart
        or before another led, is asked about here too (``_left_deleting``), unless the cloud was found done with it
        (a Node object that outlives its instance), or a drain of ours is in progress on it (``_left_deleting_step``).
        Those remembered stay until the cloud is done with them or keeps them, as before: a node whose Node object
        went while its instance is still deleted is no longer marked. One remembered under another key than its mark
        names now (a later drain of it, another replica's, ended so too) is asked about under the mark's key: the
        drainer refuses to end a drain whose key the node's mark does not name, and the node would stay cordoned."""
        if marked is None:
            return
        self._left_gone = {n: p for n, p in self._left_gone.items() if p != pool_id or n in marked}
        for node, key in sorted(marked.items()):
            if (known := self._left_deleting.get(node)) is not None and known.key != key:
                log.info(
                    "pool %s: node %s is marked as left cordoned while the cloud deleted it by the drain with key %s, "
                    "no longer by the one with key %s as remembered here: asked about for the later drain",
                    pool_id, node, key, known.key,
                )  # fmt: skip
                del self._left_deleting[node]
            if node not in self._left_deleting and node not in self._left_gone and node not in self._pending:
                log.info(
                    "pool %s: node %s was left cordoned while the cloud deleted it (drain key %s); the cloud is asked "
                    "about it at each tick", pool_id, node, key,
                )  # fmt: skip
                self._left_deleting[node] = PendingDrain(pool_id, node, key)

    def _ask_removals(self, pool_id: str) -> None:
        """Whether the cloud took the removal of the nodes of the pool's drains taken over (``_unasked``): the node
        of one taken over while the cloud deletes it, or after it deleted it (its removal went out before, a later
        write failed), is already left out of the cloud's target and ready units (``_removal_sent``). A drainer that
        cannot tell is asked nothing more; a read that fails leaves the pool's drains to ask at the next tick, each
        counted as draining meanwhile."""
        drainer = self._drainers[pool_id]
        for node in sorted(n for n in self._unasked if self._pending[n].pool_id == pool_id):
            try:
                state = removal_state(drainer, pool_id, node)
            except ActuatorError as exc:
                log.warning(
                    "pool %s: whether the cloud is deleting %s, whose drain was taken over, is unknown: %s; it is "
                    "counted as draining, and asked again at the next tick", pool_id, node, exc,
                )  # fmt: skip
                return
            self._unasked.discard(node)
            if state in ("deleting", "gone"):
                doing = "is deleting" if state == "deleting" else "has deleted"
                log.info(
                    "pool %s: the cloud %s node %s, whose drain was taken over: the pool's units read from the cloud "
                    "leave it out already", pool_id, doing, node,
                )  # fmt: skip
                self._removal_sent.add(self._pending[node].key)

    def _left_deleting_step(self, outcome: DrainOutcome, now: datetime) -> None:
        """Ask the drainer what the cloud does with the nodes left cordoned by drains that ended while it still
        deleted them (``_left_deleting``): one node per pool per step (the one asked longest ago: a read of the pool
        each), so the reads stay bounded however many are left so. A node a drain of ours is in progress on (a person
        uncordoned it, and a later release took it) is that drain's: forgotten here, never asked about, since ending
        the earlier drain (``NodeDrainer.cancel``, once the cloud keeps the node) would uncordon it and take the later
        drain's marks off, dropping it with no result."""
        asked: set[str] = set()
        for node, left in list(self._left_deleting.items()):
            if (later := self._pending.get(node)) is not None:
                log.info(
                    "pool %s: node %s, left cordoned while the cloud deleted it (drain key %s), is being drained again "
                    "(key %s): the later drain owns it, and it is no longer asked about", left.pool_id, node, left.key,
                    later.key,
                )  # fmt: skip
                del self._left_deleting[node]
                continue
            if left.pool_id in asked:
                continue
            asked.add(left.pool_id)
            del self._left_deleting[node]
            if self._still_left_deleting(outcome, left, now):
                self._left_deleting[node] = left  # asked again after the pool's others

    def _still_left_deleting(self, outcome: DrainOutcome, left: PendingDrain, now: datetime) -> bool:
        """Whether the node left cordoned by the drain ``left`` is still to be asked about: while the cloud deletes
        it, or cannot be asked. Gone, it is forgotten. Kept (the cloud stopped deleting it: its instance runs
        again), the drain is ended (``NodeDrainer.cancel``: the node uncordoned, it serves again), a warning is
        logged and the drain-deletion-overdue warning resolved, in ``outcome.alerts``. An end the drainer refuses
        (its own read of the cloud failed, or says the cloud deletes the node again or is done with it; or the
        node's Node object is gone) keeps the node to ask about at the next step, whose read decides: forgotten
        once gone, left while deleted, uncordoned once kept and its Node object there."""
        pool_id, node = left.pool_id, left.node
        drainer = self._drainers[pool_id]
        try:
            state = removal_state(drainer, pool_id, node)
        except ActuatorError as exc:
            log.warning("pool %s: whether the cloud still deletes node %s is unknown: %s", pool_id, node, exc)
            return True
        if state == "deleting":
            return True
        if state != "kept":  # gone: its Node object goes with it
            log.info("pool %s: node %s, left cordoned while the cloud deleted it, is gone", pool_id, node)
            self._left_gone[node] = pool_id
            return False
        try:
            ended = drainer.cancel(pool_id, node, left.key)
        except ActuatorError as exc:  # asked again at the next step
            log.warning(
                "pool %s: the cloud no longer deletes node %s, left cordoned when its drain ended, but it could not "
                "be uncordoned: %s", pool_id, node, exc,
            )  # fmt: skip
            return True
        if ended.status is not ActionStatus.DONE:  # the cloud deletes it again, is done with it, or was not read
            why = ended.detail  # or its Node object is gone: once one comes back, it is uncordoned and told then
            log.info(
                "pool %s: node %s, left cordoned when its drain ended, is not uncordoned now: %s; asked about again "
                "at the next step", pool_id, node, why,
            )  # fmt: skip
            return True
        log.warning(
            "pool %s: the cloud no longer deletes node %s, left cordoned when its drain (key %s) ended while it was "
            "being deleted; uncordoned, it serves again", pool_id, node, left.key,
        )  # fmt: skip
        outcome.alerts.append(deletion_stopped_alert(now, left, ended.detail))
        return False

    def _leave(self, pool_id: str, draining: Mapping[str, str]) -> None:
        """With a drainer that sends nothing: the drains the cluster records are another agent's, which this one
        cannot continue. They are not taken over (their nodes stay in the pool's units, never chosen for a drain) and
        are told about (``left_cordoned_alert``) until they end elsewhere (a person uncordoned the node, it is gone)."""
        for node, left in list(self._left.items()):
            if left.pool_id == pool_id and node not in draining:
                log.info("pool %s: node %s is no longer cordoned for a drain", pool_id, node)
                del self._left[node]
        for node, key in draining.items():
            if node not in self._left:
                log.warning(
                    "pool %s: node %s is cordoned for a drain (key %s) that this dry run cannot continue; it is left "
                    "cordoned until the drain finishes in enforce mode or a person uncordons it", pool_id, node, key,
                )  # fmt: skip
            self._left[node] = PendingDrain(pool_id, node, key)

    def _leave_left_deleting(self, pool_id: str, marked: Mapping[str, str] | None) -> None:
        """With a drainer that sends nothing: the pool's nodes an agent in enforce mode left cordoned when their drains
        ended while the cloud still deleted them, as their marks list them (``marked``, ``TellsLeftDeleting``; None:
        the drainer cannot tell). This agent neither asks the cloud about them nor uncordons them: they are told about
        (``left_deleting_alert``) until they are uncordoned or leave the cluster."""
        if marked is None:
            return
        for node, left in list(self._left_unwatched.items()):
            if left.pool_id == pool_id and node not in marked:
                log.info("pool %s: node %s is no longer cordoned after a drain whose node was deleted", pool_id, node)
                del self._left_unwatched[node]
        for node, key in sorted(marked.items()):
            if node not in self._left_unwatched:
                log.warning(
                    "pool %s: node %s is cordoned after a drain (key %s) that ended while the cloud deleted it; this "
                    "dry run does not uncordon it if the cloud keeps it: a person does", pool_id, node, key,
                )  # fmt: skip
            self._left_unwatched[node] = PendingDrain(pool_id, node, key)

    def _step(self, pending: PendingDrain, now: datetime) -> DrainOutcome:
        """One step of the drain. A step that fails may have gone out all the same (``unclear``, its release's claim
        kept): a write of it was accepted before the error (the node's removal, ``Writes.maybe_applied``), or one was
        asked and the error says its own request may have reached the cloud (``maybe_applied``: no answer). A step
        that failed on a read before asking any write (the node pool's read answered 500) sent nothing."""
        try:
            with writes_sent() as writes:
                result = self._drainers[pending.pool_id].drain(
                    pending.pool_id, pending.node, pending.key, pending.forced
                )
        except PermanentActuatorError as exc:
            self._pending.pop(pending.node, None)
            return self._failed(pending.key, pending.pool_id, now, exc, _went_out(writes, exc))
        except ActuatorError as exc:  # transient: the same key continues the drain next tick
            if writes.accepted:  # the cloud took its removal (a later write failed): its target dropped the node
                self._removal_sent.add(pending.key)
            return self._failed(pending.key, pending.pool_id, now, exc, _went_out(writes, exc))
        if result.status in _SETTLED:
            self._pending.pop(pending.node, None)
            self._first_idle.get(pending.pool_id, {}).pop(pending.node, None)
            if pending.started is None:  # taken over: another replica may remember its removal (``SettledDrains``)
                self._settled.add(pending.pool_id, pending.key, now)
        if result.status in (ActionStatus.FAILED, ActionStatus.REJECTED):
            self._held_until[pending.node] = now + max(self._window, timedelta(minutes=1))
        if result.status is ActionStatus.REJECTED:
            try:  # the pods that blocked it stop the next drain too: held while they stay as they are
                hold_rejected(self._drainers[pending.pool_id], pending.pool_id, pending.node, result.detail)
            except ActuatorError as exc:  # held for the window only; the next rejection asks again
                pool_id, node = pending.pool_id, pending.node
                log.warning("pool %s: node %s could not be held after its rejected drain: %s", pool_id, node, exc)
        log.info("pool %s: drain of %s %s: %s", pending.pool_id, pending.node, result.status, result.detail)
        outcome = DrainOutcome([result])
        if result.status is ActionStatus.FAILED:  # given up at the drain timeout: it failed since it started
            error = f"drain of {pending.node}: {result.error or result.detail}"
            outcome.failing[pending.pool_id] = (pending.started or now, error)
            if result.unclear:  # ended while the cloud still deletes the node, left cordoned: told once, from here
                watched = isinstance(self._drainers[pending.pool_id], TellsRemovalStates)
                if watched:  # uncordoned if the cloud stops deleting it
                    self._left_deleting[pending.node] = pending
                outcome.alerts.append(deletion_overdue_alert(now, pending, result, watched))
        elif result.status is ActionStatus.DONE:
            outcome.finished.add(pending.pool_id)
            if result.unfinished:  # removed with pods no kubelet finished: told once, by the step that removed it
                outcome.alerts.append(unfinished_pods_alert(now, pending, result))
        return outcome

    def _choosable(self, node: str) -> bool:
        return node not in self._pending and node not in self._held_until and node not in self._left

    @staticmethod
    def _failed(key: str, pool_id: str, now: datetime, exc: ActuatorError, unclear: bool = False) -> DrainOutcome:
        """The failed result of ``exc``; ``unclear``: what failed may have been carried out all the same (``_step``),
        not so a read before anything was sent."""
        result = ActionResult(key, pool_id, ActionStatus.FAILED, now, error=str(exc), unclear=unclear)
        if isinstance(exc, PermanentActuatorError):
            return DrainOutcome([result], {pool_id: str(exc)})
        return DrainOutcome([result], failing={pool_id: (now, str(exc))})


def deletion_overdue_alert(
    now: datetime, drained: PendingDrain, result: ActionResult, watched: bool = False
) -> AlertEvent:
    """A warning about a node whose drain ended (settled FAILED, ``unclear``) while the cloud still deleted it, longer
    than the drain waits for a deletion, or while what the cloud did with it could not be read then (the result's
    detail says which: ``actuators.drain_endings``): its removal went out (the cloud took the delete, a later write
    failed). The node is left cordoned, its drain marks replaced by ``leadtime.io/drain-left-deleting``: nothing
    continues the drain, and only a person can tell a deletion that is slow from one that hangs or failed.
    ``watched``: the leader, whichever replica leads (it reads the mark), asks the cloud about the node at each step,
    and uncordons it if the cloud stops deleting it (``NodeDrains``, resolving this warning then). A
    one-off event, raised by the step that ended the drain and never again (the drain is settled), so it is told
    once."""
    node, pool_id = drained.node, drained.pool_id
    until = (
        "The agent's leader, whichever replica leads (the node is marked leadtime.io/drain-left-deleting), asks the "
        "cloud about the instance at each tick, and uncordons the node and says so if the cloud no longer deletes it; "
        "otherwise the node stays cordoned until it leaves the cluster or a person uncordons it. After a switch to "
        "dry-run mode the leader only warns about the node at each tick."
        if watched
        else "It stays cordoned until it leaves the cluster or a person uncordons it: the agent does not look at it "
        "again."
    )
    summary = (
        f"Node {node} of pool {pool_id} is not gone, longer than its drain waits for a deletion (cloud.drain_timeout, "
        f"and at least 15 minutes): the drain (key {drained.key}) removed it, the cloud accepted the deletion and a "
        "later write failed, and at the wait's end the cloud was still deleting the instance, or what it does with "
        "it could not be read (the drain's detail says which). The drain has ended and the node is left cordoned, "
        f"so no work is scheduled on a machine on its way out. {until} Check the instance in its instance group "
        "(details): once the cloud deletes it, its Node object goes; if the cloud no longer deletes it (running, no "
        f"current action), delete the instance, or uncordon the node to use it again (kubectl uncordon {node})."
    )
    details = {
        "drain key": drained.key,
        "check the instance": (
            "its current action and last errors in its managed instance group (gcloud compute instance-groups "
            "managed list-instances GROUP --zone ZONE), and the zone's operations on it "
            f"(gcloud compute operations list --filter='targetLink~{node}')"
        ),
    }
    if result.unfinished:  # left terminating by the drain: their work is lost once the node goes
        details["pods left terminating"] = ", ".join(f"{p.namespace}/{p.name} on {p.node}" for p in result.unfinished)
    details["drain"] = result.detail
    subject = f"node {node} of {pool_id} still being deleted"
    return AlertEvent(AlertKind.DRAIN_DELETION_OVERDUE, Severity.WARNING, now, subject, summary, details)


def _went_out(writes: Writes, exc: ActuatorError) -> bool:
    """Whether a drain step that failed with ``exc`` may have been carried out: only once a write of it was asked
    (``_step``), a read's error saying nothing of a write."""
    return bool(writes.accepted) or (bool(writes.asked) and writes.maybe_applied(exc))


def _first(count: int, preferred: Sequence[str], others: Sequence[str], allowed: Callable[[str], bool]) -> list[str]:
    """Up to ``count`` distinct allowed nodes, the preferred ones first, then the others in their order."""
    chosen: list[str] = []
    for node in (*preferred, *others):
        if len(chosen) == count:
            break
        if node not in chosen and allowed(node):
            chosen.append(node)
    return chosen
