"""KubernetesNodeDrainer: find idle accelerator nodes, cordon them, evict their pods safely, then remove exactly them.

A drain cordons the node and evicts its pods through the Eviction API, so PodDisruptionBudgets are respected: a 429
means "not now", the drain reports itself started and the same key continues it on a later tick; nothing is ever
deleted by force. An accepted eviction is a graceful delete: the pod stays listed, Terminating
(``metadata.deletionTimestamp`` set), while its containers shut down, for up to its ``terminationGracePeriodSeconds``
(a training job's checkpoint on SIGTERM), so the drain also reports itself started until no pod it counts is left on
the node; a terminating pod is waited for, never evicted again. A pod that must not be disrupted blocks the drain
(``actuators.pod_rules``), and so does a pod selected by more than one PodDisruptionBudget (the Eviction API answers
500: a misconfiguration no retry fixes): the node is uncordoned and the drain rejected, its detail naming each
blocking pod and why (and, after a 500, the pods it evicted before). What each refusal of an eviction means is in
``actuators.drain_evictions``: a budget's 429 (named), the API server's throttling (no eviction sent before its
Retry-After) and a namespace being deleted are waited for; an admission webhook's denial rejects the drain; only RBAC's
refusal of pods/eviction uncordons the node and is raised as a permanent error; any other failure is raised as
transient until ``timeout``.
After ``timeout`` (counted from the first step with the drain's key, so an earlier drain of the node that was
dropped, e.g. a person uncordoned it, does not count) a drain that still has pods to evict (held by a budget, or
their eviction failing) gives up and uncordons; one left only with pods a dead kubelet abandoned (``Ready``
Unknown, seen so by this drainer past their grace periods: ``pod_rules.abandoned``) removes the node anyway and says
so in its detail and a warning, and its result names those pods (``ActionResult.unfinished``), which the agent tells
the operator once: their work may be lost. Pods terminating on a node whose kubelet is alive (``Ready`` True or
False) are waited for past the timeout: their kubelet finishes them, whatever this agent's clock says of their
``deletionTimestamp``; but not for ever: one this drainer has seen terminating, by its own clock, for its grace
period and ``pod_rules.STUCK_AFTER`` more is stuck (``pod_rules.stuck``: its kubelet killed it at the grace period's
end, or could not), and an overdue drain left only with such pods removes the node the same way (its result naming
them too), so a drain ends within its timeout, the longest grace period and ``STUCK_AFTER``. When
the node is empty, the ``NodeRemover`` (the pool's actuator) deletes exactly that node; a removal it refuses for
good, or that still fails after ``timeout`` (an AWS group at its minimum size), uncordons the empty node: back in
service, not left cordoned, paid for and unusable. A removal that fails after ``timeout`` once it may have gone out
(GKE took the deleteInstances, then answered 503 to the autoscaler bounds' move) is not given up while the cloud
deletes the node: each later step asks the cloud (``actuators.drain_endings``) and keeps the node cordoned while it
is being deleted, ends the drain DONE once it is gone (with its pods left terminating, as above), and gives the drain
up, uncordoned, when the cloud is not deleting it; a node the cloud still deletes after a bounded wait stays cordoned,
its drain ended (FAILED, the removal ``unclear``) and its drain marks replaced by ``leadtime.io/drain-left-deleting``
(the drain's key), for a person to check (whichever replica leads reads that mark and asks the cloud about the node
afterwards: ``agent.drains``, uncordoning it through ``cancel``, the mark taken off, if the cloud keeps it). A drain
waiting so is listed in ``draining_nodes`` after its node left the cluster, so the agent's next step settles it. A node
that leaves the cluster during its drain otherwise (deleted by a person, or its instance gone) ends the drain DONE:
nothing is left to drain or remove, and the pool is not at fault. ``cancel`` ends a drain by its own key only: a unit
no cordoned node of which carries its key, and a cordoned node of which carries the mark of another drain (a later
drain of the unit, by another replica perhaps, or the ``leadtime.io/drain-left-deleting`` of another) is not ended,
and the refusal names that drain (``actuators.drain_holders``); a slice whose hosts carry two keys is ended under
either. It reads the unit's Node objects from Kubernetes alone, never the cloud: a slice's hosts
in the list that names them anyway, a node in one request. Nor is such a unit drained: a step that reads the unit's
nodes (a slice's, at every step; a node's, while the pool's drains could not be read at the tick's listing, when the
agent keeps stepping the drains it remembers) and finds the mark of another drain, and its own key on no cordoned
node, writes nothing and is REJECTED, so a remembered drain whose node was drained again since never marks that
drain's node with its own key and forced flag; a slice whose cordoned hosts carry its key and another's is drained
under its key (every host marked with it), not left cordoned with no drain going on.
While a drain is in progress the node carries the annotation ``leadtime.io/drain-key`` (the drain's key), so
``draining_nodes`` lets a restarted or newly elected agent continue it instead of leaving the node cordoned; the
timeout then counts from the drain's start as its first step marked it (``leadtime.io/drain-started-at``, with the
drain's key), or, for a drain an earlier release marked without it, from when that agent took it over (marked so
from then on). The mark says so only on a cordoned node: a person who ends a
drain with ``kubectl uncordon`` leaves the marks, which are taken off when the node is read so, and a later cordon of
the node by anyone else is never taken over as the ended drain.

Only a forced drain (a release a budget's hard stop asked for) evicts accelerator work. Any other drain is of a
unit found idle, but the agent found it so on a list of pods read before the drain (shared for seconds with the
tick's survey), and the scheduler may have bound a pod to it since: a drain that is not forced, once its nodes are
cordoned (no pod can be scheduled there any more), finds on its pods read afresh any pod that is accelerator work by
the idleness rule (``pod_rules.accelerator_work``; one already terminating is going anyway) and then evicts nothing:
it uncordons the unit and is rejected, its detail naming the pods ("no longer idle: ... started on it"), and the
unit's idleness is counted again from the next time it is seen idle. Every later step checks the same on its pods.
A forced drain marks its nodes with ``leadtime.io/drain-forced`` (the drain's key) as it cordons them, and each
step reads the mark on the nodes its cordon answers with: an agent that continues the drain (after a restart, or as
the new leader) knows it is forced without being told, if a step of it ran within ``timeout``
(``leadtime.io/drain-forced-at``, renewed at each forced step). Older, the marks may be those of a drain a person
ended with ``kubectl uncordon`` while no agent ran, on a node someone cordoned since: the drain goes on unforced, and
finding accelerator work evicts nothing, takes its marks off and leaves the cordon as it is (it may be that person's;
the warning says to uncordon the node if no one else cordoned it). A drain continued unmarked is not forced: such a
drain is a release of idle units, which that agent may end for a scale-up (``unforced_drains``).

A unit is what a drain takes out of the pool whole, and is named by the ``NodeDrainer`` methods: a node
(``KubernetesNodeDrainer``: each node with the pool's label), or every node of a TPU slice
(``actuators.slice_drain``). A unit is idle when all its nodes are and busy when one of them is; its drain cordons
and empties every one of them, and the ``NodeRemover`` deletes the unit as a whole. The pod rules are in
``actuators.pod_rules``: a pod that must not be disrupted blocks the drain. Idleness is about accelerators only, but
an idle node holding such a pod is not offered as idle: the survey holds it back (``held_units``, with why) and the
agent warns about it every tick; so is a node whose drain was rejected for a pod the pods alone do not show blocking
(one under two PodDisruptionBudgets, an eviction an admission webhook refused: ``hold_rejected``), while that pod is
on it unchanged (``actuators.drain_survey``).
What a unit is, what removes it and the marks a drain leaves on its nodes are in ``actuators.drain_units``; how the
marks are read (and those of ended drains taken off) is in ``actuators.drain_marks``; how a drain ends (removed,
rejected, failed, its unit gone) and what the drainer remembers of its drains is in ``actuators.drain_endings``.
Which units are idle, how busy the others are (``idle_nodes``, ``pool_nodes``) and how the pods on their nodes are
read are in ``actuators.drain_survey``: the drainer is a ``KubernetesUnitSurvey`` that also drains.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from actuators.drain_endings import KubernetesDrainEndings
from actuators.drain_evictions import evict_pods
from actuators.drain_holders import held_against, not_ended, not_stepped
from actuators.drain_mark_names import (
    DRAIN_ANNOTATION,
    FORCED_ANNOTATION,
    FORCED_AT_ANNOTATION,
)
from actuators.drain_marks import drain_started, forced_lately
from actuators.drain_units import (
    NODE_POOL_LABEL,
    DrainUnits,
    KeepsUnits,
    NodeRemover,
    NodeUnits,
    named_unread,
    read_unit_nodes,
)
from actuators.pod_rules import counts, must_stay, pod_name, terminating
from kube.api import KubernetesApi
from kube.models import V1Node, V1Pod
from models import ActionResult, ActionStatus, ActuatorError, PermanentActuatorError, UnfinishedPod
from models.clock import Clock
from models.errors import KubernetesApiError

__all__ = [
    "DRAIN_ANNOTATION",
    "FORCED_ANNOTATION",
    "NODE_POOL_LABEL",
    "DrainUnits",
    "KeepsUnits",
    "KubernetesNodeDrainer",
    "KubernetesUnitDrainer",
    "NodeRemover",
    "NodeUnits",
]

log = logging.getLogger(__name__)


def _waits(waiting: Mapping[tuple[str, str], str], unit: str, after: timedelta | None = None) -> str:
    """What the pods not evicted wait for (``after`` the drain's timeout: still), grouped by reason: a disruption
    budget (named), the API server's throttling, their namespace being deleted."""
    by_why: dict[str, list[tuple[str, str]]] = {}
    for pod, why in waiting.items():
        by_why.setdefault(why, []).append(pod)
    told = []
    for why, pods in by_why.items():
        if "disruption budget" not in why.lower():
            told.append(f"{pods} on {unit} not evicted {f'after {after}' if after else 'yet'}: {why}")
        elif after:
            told.append(f"disruption budgets still block {pods} after {after}: {why}")
        else:
            told.append(f"waiting for disruption budgets to allow evicting {pods} from {unit}: {why}")
    return "; ".join(told)


class KubernetesUnitDrainer(KubernetesDrainEndings):
    """A ``NodeDrainer`` whose units (the "nodes" its methods name) are groups of Kubernetes nodes found by ``units``;
    ``remover`` deletes a drained unit. ``api`` reaches the cluster (each call bounded by its request timeout);
    ``accelerator_resources`` are resources (besides ``ACCELERATOR_RESOURCES`` and the node's own extended
    resources) whose request makes a pod accelerator work: the demand classes' resources."""

    def __init__(
        self,
        api: KubernetesApi,
        clock: Clock,
        units: DrainUnits,
        remover: NodeRemover,
        timeout: timedelta = timedelta(minutes=15),
        accelerator_resources: Iterable[str] = (),
    ) -> None:
        super().__init__(api, clock, units, remover, timeout, accelerator_resources)
        self._not_before: dict[str, float] = {}  # unit -> monotonic time before which no eviction is sent (429)
        # Pools whose drains could not be listed at the last try (``draining_nodes``): a step of a drain there reads
        # its unit's nodes even where naming them reads nothing (``_step_members``)
        self._drains_unread: set[str] = set()

    def draining_nodes(self, pool_id: str) -> Mapping[str, str]:
        """Units of the pool with a node cordoned and carrying our drain annotation, with the key of their drain;
        and, where a unit is removed without nodes (a slice), a unit of the pool whose nodes all left the cluster
        during this drainer's drain of it: nothing in the cluster records that drain any more, but the unit is still
        there and paid for, and the drain's next step removes it. So is a unit whose removal went out and then failed
        (``drain_endings.TellsRemovals``), or that was removed and its nodes' unmarking failed, after its nodes left
        the cluster: the drain's next step settles it. A unit
        whose nodes are all uncordoned or unmarked is no longer being drained (a person uncordoned it): its drain is
        forgotten here too, so its nodes leaving later does not remove it; and the marks that drain left are no drain
        of ours (``_drains_of``). A drain listed that this drainer is not carrying on under its key is taken over:
        its first step here asks the cloud whether its removal went out before (``_taken_over_step``)."""
        draining = {}
        self.forget_reads(pool_id)  # a new tick: the cloud is asked afresh
        self._drains_unread.add(pool_id)  # until the read below answers
        drains = self._drains_of(pool_id)
        self._drains_unread.discard(pool_id)
        asking = {unit: taken[1] for unit, taken in self._taken_over.items() if taken[0] == pool_id}
        for unit in asking:  # listed again below, with the nodes read now, while the drain is still there
            del self._taken_over[unit]
        for unit, (key, nodes) in drains.items():
            since = self._draining_since.get(unit)
            if key is not None:
                draining[unit] = key
                mine = (since is not None and since[0] == key) or self._removal_known(unit, key)
                if not mine or asking.get(unit) == key:  # taken over, or its first step here could not ask yet
                    self._taken_over[unit] = (pool_id, key, nodes)
            elif nodes:
                self._draining_since.pop(unit, None)
                self._removing.pop(unit, None)
            elif since is not None and self._units.removed_without_nodes:
                draining[unit] = since[0]
        for unit, removal in self._removing.items():
            if removal.pool_id == pool_id:
                draining.setdefault(unit, removal.key)
        for unit, removed in self._unmarking.items():  # removed, its nodes not unmarked yet: settled at its next step
            if removed.pool_id == pool_id:
                draining.setdefault(unit, removed.key)
        return draining

    def drain(self, pool_id: str, node: str, key: str, forced: bool = False) -> ActionResult:
        """Drain the unit ``node`` (a node, or a slice: every node of it). Unless ``forced`` (or its nodes are marked
        with this key as a forced drain's), a unit found running accelerator work is uncordoned and the drain
        rejected, nothing evicted. A unit whose nodes, where the step reads them (``_step_members``), carry the mark
        of another drain and this key on no cordoned node is not drained under this key (``_not_stepped``)."""
        unit = node
        taken_over = (taken := self._taken_over.get(unit)) is not None and taken[1] == key
        # Settled, or its removal went out at an earlier step (or before it was taken over): what the cloud does with
        # the unit decides.
        if (
            known := self._results.get(key)
            or self._unmark_step(key, pool_id, unit)
            or self._removal_step(key, pool_id, unit)
            or self._taken_over_step(key, pool_id, unit)
        ) is not None:
            return known
        marked = drain_started(taken[2], key, self._clock.now()) if taken is not None and taken_over else None
        now, started, overdue = self._step_start(unit, key, taken_over, marked)
        members, found = self._step_members(pool_id, unit)
        if others := held_against(found, key):
            return self._not_stepped(key, pool_id, unit, others)
        if (
            started
            and isinstance(self._remover, KeepsUnits)
            and (kept := self._kept(self._remover, pool_id, unit, members))
        ):
            # Not started: the unit would stay, cordoned and emptied for nothing until the drain's timeout. A drain
            # taken over (its nodes cordoned already) is ended the same way, its nodes uncordoned.
            self._give_up(pool_id, unit, members, kept)
            return self._results.remember(self._result(key, pool_id, ActionStatus.REJECTED, f"not drained: {kept}"))
        since = self._draining_since[unit][1] if started else None  # marked at the first step here
        cordoned = [found for name in members if (found := self._cordon(pool_id, name, key, forced, since)) is not None]
        nodes = [found.metadata.name for found in cordoned]
        if not nodes and not self._units.removed_without_nodes:
            return self._gone(key, pool_id, unit)
        # A drain taken over from another agent is forced when that agent marked its nodes so, and a step of it ran
        # within the timeout: older marks may be those of a drain a person ended, left on a node cordoned since.
        taken_over_forced = not forced and any(
            (found.metadata.annotations or {}).get(FORCED_ANNOTATION) == key for found in cordoned
        )
        stale_forced = taken_over_forced and not forced_lately(cordoned, now, self._timeout)
        if taken_over_forced and not stale_forced:
            forced = True
            for name in nodes:  # renewed, as this drainer's own forced steps renew it at the cordon
                self._patch_node(pool_id, name, {"metadata": {"annotations": {FORCED_AT_ANNOTATION: now.isoformat()}}})
        # A first step reads the pods after cordoning (a list read before could miss a pod scheduled meanwhile); a
        # later one may share the tick's list, read after the cordon of an earlier step, when no pod can arrive.
        on_nodes = self._pods_by_node(pool_id, nodes, fresh=started)
        if not forced and (working := self._working(cordoned, on_nodes)):
            self._idle_since.pop(unit, None)
            if stale_forced:
                return self._reject_stale_forced(key, pool_id, unit, nodes, working)
            why = f"no longer idle: {', '.join(working)} started on it"
            return self._reject(key, pool_id, unit, nodes, why)
        pods = [p for name in nodes for p in on_nodes[name] if counts(p)]
        blockers = [f"{'/'.join(pod_name(p))} ({', '.join(reasons)})" for p in pods if (reasons := must_stay(p))]
        if blockers:
            return self._reject(key, pool_id, unit, nodes, f"pods that must not be disrupted: {'; '.join(blockers)}")
        mono = self._clock.monotonic()
        throttled = mono < self._not_before.get(unit, mono)
        try:
            done = evict_pods(self._pods_api, pool_id, pods, lambda: self._check_may_write(pool_id, unit), throttled)
        except ActuatorError as error:
            if isinstance(error, PermanentActuatorError):
                self._give_up(pool_id, unit, nodes, error.reason)
            elif overdue and isinstance(error.__cause__, KubernetesApiError):  # not a lost leadership
                return self._fail(key, pool_id, unit, nodes, f"still failing after {self._timeout}: {error.reason}")
            raise
        if done.rejected:
            return self._reject(key, pool_id, unit, nodes, done.rejected)
        if done.retry_after_s is not None:
            self._not_before[unit] = mono + done.retry_after_s
        if done.evicted:  # which of the evicted pods are gone already, and which are terminating
            pods = self._pods_of(pool_id, nodes, fresh=True)
        leaving = [pod_name(p) for p in pods if terminating(p)]
        waiting = {pod_name(p): done.waiting.get(pod_name(p), "not evicted yet") for p in pods if not terminating(p)}
        if waiting and overdue:
            return self._fail(key, pool_id, unit, nodes, _waits(waiting, unit, self._timeout))
        left = self._left_for_good(pods, cordoned)  # (abandoned, stuck)
        if waiting or (leaving and not (overdue and sum(map(len, left)) == len(leaving))):
            after = f" (after {self._timeout}: waited for while a kubelet may still finish them)" if overdue else ""
            detail = "; ".join(
                [_waits(waiting, unit)] * bool(waiting)
                + [f"waiting for {leaving} on {unit} to finish terminating{after}"] * bool(leaving)
            )
            log.info("pool %s: %s (key %s)", pool_id, detail, key)
            return self._result(key, pool_id, ActionStatus.STARTED, detail)
        return self._remove_settled(
            key, pool_id, unit, nodes, _unfinished(pods, left), overdue, started, read_again=bool(done.evicted)
        )

    def _step_start(
        self, unit: str, key: str, taken_over: bool, marked: datetime | None = None
    ) -> tuple[datetime, bool, bool]:
        """The time of a step of the drain with this key, whether it is this drainer's first step of the drain (a new
        drain, one after a drain dropped: a person uncordoned it, or one taken over), and whether the drain is past its
        timeout, counted from its first step here, or from ``marked`` (the start its nodes' marks say, for a drain
        ``taken_over``). A drain started here, not ``taken_over``, is remembered so (``_started_here``): its removal,
        if any, is this drainer's to ask for."""
        now = self._clock.now()
        since = self._draining_since.get(unit)
        if since is not None and since[0] == key:
            return now, False, now - since[1] >= self._timeout
        start = now if marked is None else min(marked, now)
        self._draining_since[unit] = (key, start)
        if not taken_over:
            self._started_here[unit] = key
        return now, True, now - start >= self._timeout

    def _left_for_good(
        self, pods: Sequence[V1Pod], nodes: Sequence[V1Node]
    ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """The terminating pods of ``pods`` no kubelet is finishing: those its node's dead kubelet left behind
        (``_abandoned``, by the rule the survey reads it with), and of the others those stuck (``_stuck``: seen
        terminating past their grace period and ``pod_rules.STUCK_AFTER``, on a node whose kubelet is alive too).
        Each step asks of every one, so the time a pod has been seen so counts from the drain's first step."""
        node_of = {node.metadata.name: node for node in nodes}
        abandoned, stuck = [], []
        for pod in pods:
            if not terminating(pod):
                continue
            left, stuck_so = self._abandoned(pod, node_of[pod.spec.node_name]), self._stuck(pod)  # both recorded
            if left:
                abandoned.append(pod_name(pod))
            elif stuck_so:
                stuck.append(pod_name(pod))
        return abandoned, stuck

    def cancel(self, pool_id: str, node: str, key: str) -> ActionResult:
        """End the drain of the unit ``node`` with this key: every node of it uncordoned and unmarked. Refused when a
        cordoned node of the unit carries the mark of another drain and none this key (``drain_holders``): a caller
        holding the key of a drain that ended since (and a new drain of the unit started, by another replica perhaps)
        would end that one.
        The unit's nodes are read from Kubernetes alone (``read_unit_nodes``: a slice's hosts in the one list that
        names them, a node in one request), never the cloud: a cloud that cannot be read does not keep a drain
        started here, whose removal was never asked for, from being ended (``_removal_under_way``)."""
        unit = node
        noun = self._units.noun
        found = self._call(pool_id, lambda: read_unit_nodes(self._units, self._nodes_api, pool_id, unit))
        if others := held_against(found, key):
            held = not_ended(noun, unit, key, others)
            log.warning("pool %s: %s (key %s)", pool_id, held, key)
            return self._result(key, pool_id, ActionStatus.REJECTED, held)
        if under_way := self._removal_under_way(pool_id, unit, key):  # on its way out: uncordoned, it would serve
            log.info("pool %s: %s (key %s)", pool_id, under_way, key)
            return self._result(key, pool_id, ActionStatus.REJECTED, under_way)
        members = [found_node.metadata.name for found_node in found]
        self._check_may_write(pool_id, unit)
        back = [name for name in members if self._cordon(pool_id, name, None) is not None]
        if not back:  # its drain goes on: it ends the drain of a node gone, or removes a slice left without nodes
            detail = f"{noun} {unit} has no node in the cluster any more; its drain goes on"
            return self._result(key, pool_id, ActionStatus.REJECTED, detail)
        self._draining_since.pop(unit, None)
        self._removal_asked.pop(unit, None)  # given back to serve: the cloud keeps it, no removal of it is under way
        detail = f"drain of {noun} {unit} ended before it was removed: uncordoned, it serves again"
        log.info("pool %s: %s (key %s)", pool_id, detail, key)
        return self._result(key, pool_id, ActionStatus.DONE, detail)

    def _step_members(self, pool_id: str, unit: str) -> tuple[Sequence[str], Sequence[V1Node] | None]:
        """The names of the unit's nodes for a drain step, and the nodes as read (None: not read). Read from
        Kubernetes (``read_unit_nodes``) where naming them reads them anyway (a slice's hosts, one list); a node,
        named without a read, is read (one request more) only while its pool's drains could not be listed at the last
        try (``draining_nodes``): the agent then steps the drains it remembers without knowing whether another drain
        of their nodes started since, which a listing tells it (it takes that drain over, ``agent.drains``)."""
        if named_unread(self._units) and pool_id not in self._drains_unread:
            return self._call(pool_id, lambda: self._units.nodes(pool_id, unit)), None
        found = self._call(pool_id, lambda: read_unit_nodes(self._units, self._nodes_api, pool_id, unit))
        return [node.metadata.name for node in found], found

    def _not_stepped(self, key: str, pool_id: str, unit: str, others: dict[str, list[str]]) -> ActionResult:
        """The unit's nodes carry the marks of ``others`` (``drain_holders.held_against``), another drain of it: the
        drain with ``key`` ended, and a step of it would write its key (and forced flag, and start) over that drain's
        marks. Nothing is written; the drain is settled REJECTED, told as a warning, and what this drainer remembers
        of it alone (its start, that it started here, a take-over of it) is forgotten."""
        if (since := self._draining_since.get(unit)) is not None and since[0] == key:
            del self._draining_since[unit]
        if self._started_here.get(unit) == key:
            del self._started_here[unit]
        if (taken := self._taken_over.get(unit)) is not None and taken[1] == key:
            del self._taken_over[unit]
        detail = not_stepped(self._units.noun, unit, key, others)
        log.warning("pool %s: %s (key %s)", pool_id, detail, key)
        return self._results.remember(self._result(key, pool_id, ActionStatus.REJECTED, detail))


def _unfinished(
    pods: Sequence[V1Pod], left: tuple[list[tuple[str, str]], list[tuple[str, str]]]
) -> tuple[UnfinishedPod, ...]:
    """The pods of ``pods`` no kubelet finishes (``left``: abandoned, stuck), each with its node: what a removal of
    their unit names (``ActionResult.unfinished``)."""
    node_of = {pod_name(p): str(p.spec.node_name) for p in pods}
    abandoned, stuck = left
    return tuple(
        UnfinishedPod(namespace, name, node_of[namespace, name], kubelet_gone)
        for kubelet_gone, named in ((True, abandoned), (False, stuck))
        for namespace, name in named
    )


class KubernetesNodeDrainer(KubernetesUnitDrainer):
    """Each node is a unit: ``node_pools`` maps our pool ids to the values of ``pool_label`` their nodes carry."""

    def __init__(
        self,
        api: KubernetesApi,
        clock: Clock,
        node_pools: Mapping[str, str],
        remover: NodeRemover,
        timeout: timedelta = timedelta(minutes=15),
        pool_label: str = NODE_POOL_LABEL,
        accelerator_resources: Iterable[str] = (),
    ) -> None:
        units = NodeUnits(api.nodes, pool_label, node_pools)
        super().__init__(api, clock, units, remover, timeout, accelerator_resources)
