"""A slice whose cordoned hosts carry two drain keys is drained, or ended, under either of them: it is never left
cordoned with no drain going on.

A leader that lost its lease midway through a step, or a release that wrote its key over part of a slice, leaves some
hosts marked with one key and the others with another. The pool's drain listing names the slice under the first key
it meets; a step under that key refused the slice for the other key's marks (REJECTED, settled), the next tick took it
over and refused it again, and the other key was never listed: the slice stayed cordoned and paid for, drained by
nobody. A drain still holds its unit while one cordoned node carries its key (``drain_holders.held_against``): its
step marks every host with its key and drains the slice, and its cancel uncordons every host. A drain whose key is on
no cordoned node (only on a host a person uncordoned) is still refused. Real drainers and clients on the fake
Kubernetes and GKE APIs."""

from __future__ import annotations

from datetime import timedelta

from actuators.drain_holders import held_against
from actuators.drain_mark_names import DRAIN_ANNOTATION
from actuators.drain_units import NODE_POOL_LABEL
from agent.drains import NodeDrains
from models import ActionStatus
from tests.actuators import test_slice_drain
from tests.actuators.test_drain_key_check_reads import NEW, OLD, SLICE, _held_by_a_budget, _keys
from tests.actuators.test_slice_drain import POOL, Slices

slices = test_slice_drain.slices  # three 4-host slices of group v5e on the fake Kubernetes and GKE APIs
MINUTE = timedelta(minutes=1)


def _mark_halves(rig: Slices, first_cordoned: bool = True) -> None:
    """The slice's first two hosts marked with ``OLD`` (cordoned unless not ``first_cordoned``), the other two
    cordoned and marked with ``NEW``."""
    for i, host in enumerate(rig.hosts(SLICE)):
        cordon, key = (True, NEW) if i >= 2 else (first_cordoned, OLD)
        marks = {"spec": {"unschedulable": cordon}, "metadata": {"annotations": {DRAIN_ANNOTATION: key}}}
        rig.api.nodes.patch(host, marks)


def test_a_slice_marked_with_two_keys_is_drained_and_deleted_under_the_key_listed(slices: Slices) -> None:
    rig = slices
    _mark_halves(rig)
    drains = NodeDrains({POOL: rig.drainer}, timedelta(0))
    statuses: list[ActionStatus] = []
    for _ in range(3):
        rig.clock.advance(MINUTE)
        drains.observe({s.pool_id: s for s in rig.actuator.list_pools()}, rig.clock.now())
        if not statuses:
            assert [(p.node, p.key) for p in drains.pending] == [(SLICE, OLD)]
        statuses += [r.status for r in drains.continue_pending(rig.clock.now()).results]
        if statuses == [ActionStatus.STARTED]:  # its first step marked every host with its key
            assert _keys(rig) == {OLD} and all(rig.cordoned(host) for host in rig.hosts(SLICE))

    assert statuses == [ActionStatus.STARTED, ActionStatus.DONE]  # was REJECTED at every tick
    assert rig.statuses()[SLICE] == "STOPPING"
    assert rig.gke.calls("DELETE", "/nodePools/") == 1
    assert not drains.pending


def test_a_slice_marked_with_two_keys_is_ended_under_either_key(slices: Slices) -> None:
    rig = slices
    _held_by_a_budget(rig)
    _mark_halves(rig)

    ended = rig.drainer.cancel(POOL, SLICE, OLD)  # a scale-up's take-back: the slice serves, none is bought

    assert ended.status is ActionStatus.DONE, ended
    assert not any(rig.cordoned(host) for host in rig.hosts(SLICE))
    assert _keys(rig) == {None}
    assert rig.gke.calls("DELETE", "/nodePools/") == 0


def test_a_drain_whose_key_is_on_no_cordoned_host_is_neither_stepped_nor_ended(slices: Slices) -> None:
    """Its key left only on hosts a person uncordoned: the slice is held by the other drain alone."""
    rig = slices
    _held_by_a_budget(rig)
    _mark_halves(rig, first_cordoned=False)
    hosts = rig.hosts(SLICE)
    assert held_against(rig.api.nodes.with_label(f"{NODE_POOL_LABEL}={SLICE}"), OLD) == {
        f"{DRAIN_ANNOTATION}={NEW}": hosts[2:]
    }
    patches = rig.kube.calls("patch", "nodes")

    stepped, ended = rig.drainer.drain(POOL, SLICE, OLD), rig.drainer.cancel(POOL, SLICE, OLD)

    assert (stepped.status, ended.status) == (ActionStatus.REJECTED, ActionStatus.REJECTED), (stepped, ended)
    assert rig.kube.calls("patch", "nodes") == patches  # nothing written
    assert [rig.cordoned(host) for host in hosts] == [False, False, True, True]
    assert rig.drainer.cancel(POOL, SLICE, NEW).status is ActionStatus.DONE  # the other drain ends it
    assert not any(rig.cordoned(host) for host in hosts)
