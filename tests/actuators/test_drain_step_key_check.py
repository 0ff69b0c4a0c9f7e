"""A drain step does not write over another drain's marks: a unit whose cordoned nodes carry the mark of another
drain (``leadtime.io/drain-key``, or ``leadtime.io/drain-left-deleting``) is not drained under the step's key.

A replica whose read of the pool's drains fails keeps stepping the drains it remembers. One of them may have ended
meanwhile (a person uncordoned its node) and another replica drained the node again under another key: the step
cordoned the node with the old key, took the newer drain over under it, with the old drain's forced flag. Such a step
now writes nothing and is REJECTED, its detail naming the other drain; the agent forgets the old drain and takes the
new one over once the pool's drains are read. A slice's step reads its hosts anyway and checks them at every step; a
node's step reads its node (one request) only while the pool's drains could not be listed. A new drain of a unit an
ended drain left marked but schedulable, or that a person cordoned without a mark, goes on as before, and so does a
drain taken over from the cluster's record (its own key). Real drainers and clients on the fake Kubernetes and GKE
APIs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from actuators.drain_holders import not_stepped, other_drains
from actuators.drain_mark_names import DRAIN_ANNOTATION, FORCED_ANNOTATION, LEFT_DELETING_ANNOTATION
from actuators.drain_units import NODE_POOL_LABEL
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from models import ActionStatus, ActuatorError, PoolState, Resize
from models.plan import drain_key
from tests.actuators import kubernetes_drain_rig, test_slice_drain
from tests.actuators.kubernetes_drain_rig import Cluster, _cordoned
from tests.actuators.test_drain_cancel_key import _held_by_a_budget as _budget_holds
from tests.actuators.test_drain_key_check_reads import SLICE, _held_by_a_budget, _keys
from tests.actuators.test_drain_removal_under_way import UNAVAILABLE
from tests.actuators.test_slice_drain import POOL, Slices, _remove_hosts

cluster = kubernetes_drain_rig.cluster  # the fake Kubernetes and GKE APIs, a pool "a" of three nodes
slices = test_slice_drain.slices  # three 4-host slices of group v5e on the same fakes
OLD, NEW = "rel-1/drain/old", "rel-2/drain/new"
MINUTE = timedelta(minutes=1)


def _annotations(c: Cluster, node: str) -> dict[str, str]:
    found = c.kube.get("nodes", node)
    assert found is not None
    return dict(found["metadata"].get("annotations") or {})


def _other_replica(c: Cluster) -> KubernetesNodeDrainer:
    return KubernetesNodeDrainer(c.api, c.clock, {"a": "a100"}, c.actuator, timedelta(minutes=15))


def _pools(c: Cluster) -> dict[str, PoolState]:
    return {s.pool_id: s for s in c.actuator.list_pools()}


def test_a_remembered_drain_is_not_stepped_over_the_forced_drain_another_replica_started_since(
    cluster: Cluster,
) -> None:
    c = cluster
    node = c.nodes[1]
    _budget_holds(c)
    first = NodeDrains({"a": c.drainer}, timedelta(0))
    first.observe(_pools(c), c.clock.now())
    started = first.scale_down(Resize("a", 3, 2, "idle", "rel-1"), c.clock.now(), [node])
    assert [r.status for r in started.results] == [ActionStatus.STARTED]
    c.api.nodes.patch(node, {"spec": {"unschedulable": False}})  # a person ends it (kubectl uncordon)
    second = NodeDrains({"a": _other_replica(c)}, timedelta(0))  # leads meanwhile
    c.clock.advance(MINUTE)
    second.observe(_pools(c), c.clock.now())
    hard_stop = second.scale_down(Resize("a", 3, 2, "budget", "rel-2", forced=True), c.clock.now(), [node])
    assert [r.status for r in hard_stop.results] == [ActionStatus.STARTED]
    newer = drain_key("rel-2", node)
    marks = _annotations(c, node)
    assert (marks[DRAIN_ANNOTATION], marks[FORCED_ANNOTATION]) == (newer, newer)

    c.clock.advance(MINUTE)  # the first replica leads again, and its read of the pool's drains fails
    c.kube.fail_next(1, 503, verb="list", resource="nodes")
    first.observe(_pools(c), c.clock.now())
    assert [p.key for p in first.pending] == [drain_key("rel-1", node)]
    patches = c.kube.calls("patch", "nodes")
    [refused] = first.continue_pending(c.clock.now()).results  # cordoned and marked the node with rel-1's key

    assert refused.status is ActionStatus.REJECTED, refused
    assert refused.detail == (
        f"not drained under key {drain_key('rel-1', node)}: node {node} carries the mark of another drain "
        f"({DRAIN_ANNOTATION}={newer} on {node}); the drain with key {drain_key('rel-1', node)} ended (the node was "
        "drained again since, by another replica perhaps), and nothing was written: the other drain goes on, "
        f"continued by whichever replica leads (to end it by hand: kubectl uncordon {node})"
    )
    assert _annotations(c, node) == marks and _cordoned(c, node)  # the forced drain's marks, as it left them
    assert c.kube.calls("patch", "nodes") == patches + 1  # the node's read: nothing written
    assert not first.pending  # settled: not stepped again
    assert first.continue_pending(c.clock.now()).results == []

    c.clock.advance(MINUTE)
    first.observe(_pools(c), c.clock.now())  # read now: the forced drain is taken over under its own key
    assert [(p.key, p.idle) for p in first.pending] == [(newer, False)]
    [step] = first.continue_pending(c.clock.now()).results
    assert step.status is ActionStatus.STARTED, step  # it goes on, forced, held by the budget
    assert _annotations(c, node)[FORCED_ANNOTATION] == newer


def test_a_node_step_reads_no_node_while_the_pools_drains_are_listed(cluster: Cluster) -> None:
    """The listing of the pool's drains tells the agent a node drained under another key (it takes that drain over):
    a node's step reads nothing more, one patch per step as before."""
    c = cluster
    node = c.nodes[0]
    _budget_holds(c)
    assert c.drainer.drain("a", node, OLD).status is ActionStatus.STARTED
    assert c.drainer.draining_nodes("a") == {node: OLD}
    patches = c.kube.calls("patch", "nodes")
    assert c.drainer.drain("a", node, OLD).status is ActionStatus.STARTED
    assert c.kube.calls("patch", "nodes") == patches + 1  # the cordon


def test_a_new_node_drain_goes_on_over_a_persons_cordon_while_the_pools_drains_cannot_be_listed(
    cluster: Cluster,
) -> None:
    c = cluster
    node = c.nodes[2]
    c.api.nodes.patch(node, {"spec": {"unschedulable": True}})  # a person's cordon, no mark
    c.kube.fail_next(1, 503, verb="list", resource="nodes")
    with pytest.raises(ActuatorError):
        c.drainer.draining_nodes("a")
    patches = c.kube.calls("patch", "nodes")

    started = c.drainer.drain("a", node, NEW)

    assert started.status is ActionStatus.STARTED, started
    assert _annotations(c, node)[DRAIN_ANNOTATION] == NEW
    assert c.kube.calls("patch", "nodes") == patches + 2  # the node's read, then its cordon


def test_a_slice_drain_is_not_stepped_over_a_drain_another_replica_started_since(slices: Slices) -> None:
    rig = slices
    _held_by_a_budget(rig)
    assert rig.drainer.drain(POOL, SLICE, OLD).status is ActionStatus.STARTED
    for host in rig.hosts(SLICE):  # a person ends that drain (kubectl uncordon)
        rig.api.nodes.patch(host, {"spec": {"unschedulable": False}})
    other = rig.new_drainer()
    assert SLICE not in other.draining_nodes(POOL)  # the ended drain's marks are taken off when read
    assert other.drain(POOL, SLICE, NEW).status is ActionStatus.STARTED
    patches = rig.kube.calls("patch", "nodes")

    refused = rig.drainer.drain(POOL, SLICE, OLD)  # no listing of drains failed: a slice's step checks always

    assert refused.status is ActionStatus.REJECTED, refused
    hosts = rig.hosts(SLICE)
    assert refused.detail == not_stepped("slice", SLICE, OLD, {f"{DRAIN_ANNOTATION}={NEW}": hosts})
    assert _keys(rig) == {NEW} and all(rig.cordoned(host) for host in hosts)
    assert rig.kube.calls("patch", "nodes") == patches
    rig.clock.advance(MINUTE)  # a step taken again would answer with a later time
    assert rig.drainer.drain(POOL, SLICE, OLD) == refused  # settled under its key
    assert other.drain(POOL, SLICE, NEW).status is ActionStatus.STARTED  # the other drain goes on


def test_a_refused_slice_drain_is_not_listed_once_the_slices_nodes_leave(slices: Slices) -> None:
    """The refused drain's start is forgotten: the slice's hosts leaving the cluster later (the other drain's removal
    under way, a repair) do not make this drainer list the slice under the refused key, as a drain of its own whose
    slice lost its nodes."""
    rig = slices
    _held_by_a_budget(rig)
    assert rig.drainer.drain(POOL, SLICE, OLD).status is ActionStatus.STARTED
    for host in rig.hosts(SLICE):  # a person ends that drain (kubectl uncordon)
        rig.api.nodes.patch(host, {"spec": {"unschedulable": False}})
    other = rig.new_drainer()
    assert other.drain(POOL, SLICE, NEW).status is ActionStatus.STARTED
    refused = rig.drainer.drain(POOL, SLICE, OLD)
    assert refused.status is ActionStatus.REJECTED, refused
    _remove_hosts(rig, SLICE)
    rig.clock.advance(MINUTE)

    assert SLICE not in rig.drainer.draining_nodes(POOL)
    assert rig.drainer.drain(POOL, SLICE, OLD) == refused
    assert rig.gke.calls("DELETE", "/nodePools/") == 0
    assert rig.statuses()[SLICE] == "RUNNING"


def test_a_refused_take_over_is_forgotten_when_the_cloud_could_not_be_asked(cluster: Cluster) -> None:
    """A node drain taken over from the cluster's record, whose step here (the pool's drains unlisted) could not ask
    the cloud whether its removal went out (the instance groups answering 503), and whose node another drain marked
    since, is settled without being remembered as taken over."""
    c = cluster
    node = c.nodes[1]
    _budget_holds(c)
    assert _other_replica(c).drain("a", node, OLD).status is ActionStatus.STARTED
    assert c.drainer.draining_nodes("a") == {node: OLD}  # taken over
    c.api.nodes.patch(node, {"spec": {"unschedulable": False}})  # a person ends it (kubectl uncordon)
    assert _other_replica(c).drain("a", node, NEW).status is ActionStatus.STARTED  # drained again elsewhere
    c.clock.advance(MINUTE)
    c.kube.fail_next(1, 503, verb="list", resource="nodes")
    with pytest.raises(ActuatorError):
        c.drainer.draining_nodes("a")
    c.gke.fail_next(1000, 503, UNAVAILABLE, path="listManagedInstances")

    refused = c.drainer.drain("a", node, OLD)

    assert refused.status is ActionStatus.REJECTED, refused
    assert _annotations(c, node)[DRAIN_ANNOTATION] == NEW and _cordoned(c, node)
    assert node not in c.drainer._taken_over


def test_a_slice_left_deleting_by_another_drain_is_not_stepped(slices: Slices) -> None:
    rig = slices
    hosts = rig.hosts(SLICE)
    left = {"spec": {"unschedulable": True}, "metadata": {"annotations": {LEFT_DELETING_ANNOTATION: NEW}}}
    for host in hosts:
        rig.api.nodes.patch(host, left)

    refused = rig.drainer.drain(POOL, SLICE, OLD)

    assert refused.status is ActionStatus.REJECTED, refused
    assert f"{LEFT_DELETING_ANNOTATION}={NEW} on {', '.join(hosts)}" in refused.detail
    assert all(
        (rig.kube.get("nodes", h) or {})["metadata"]["annotations"].get(LEFT_DELETING_ANNOTATION) == NEW for h in hosts
    )


def test_a_new_slice_drain_goes_on_over_an_ended_drains_marks_and_a_persons_cordon(slices: Slices) -> None:
    rig = slices
    _held_by_a_budget(rig)
    marked, cordoned = rig.hosts("v5e-1"), rig.hosts("v5e-2")
    for host in marked:  # a drain a person ended (kubectl uncordon): its mark left on schedulable nodes
        rig.api.nodes.patch(host, {"metadata": {"annotations": {DRAIN_ANNOTATION: OLD}}})
    for host in cordoned:  # a person's cordon, no mark
        rig.api.nodes.patch(host, {"spec": {"unschedulable": True}})

    first = rig.drainer.drain(POOL, "v5e-1", NEW)
    second = rig.drainer.drain(POOL, "v5e-2", "rel-3/drain/v5e-2")

    assert (first.status, second.status) == (ActionStatus.STARTED, ActionStatus.STARTED), (first, second)
    assert _keys(rig) == {NEW}
    assert all(rig.cordoned(host) for host in marked + cordoned)


def test_a_slice_drain_taken_over_from_the_clusters_record_is_stepped(slices: Slices) -> None:
    rig = slices
    _held_by_a_budget(rig)
    assert rig.drainer.drain(POOL, SLICE, OLD).status is ActionStatus.STARTED
    other = rig.new_drainer()  # a restart, or a new leader
    assert other.draining_nodes(POOL) == {SLICE: OLD}
    assert other_drains(rig.api.nodes.with_label(f"{NODE_POOL_LABEL}={SLICE}"), OLD) == {}

    step = other.drain(POOL, SLICE, OLD)

    assert step.status is ActionStatus.STARTED, step
    assert _keys(rig) == {OLD}
