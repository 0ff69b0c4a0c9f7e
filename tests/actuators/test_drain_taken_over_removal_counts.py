"""A drain taken over after the cloud took its node's removal does not take the node out of its pool a second time.

The replica that sent a removal the cloud took (GKE's deleteInstances accepted, a later write failing) knows the
cloud's target and ready units leave the node out already, and counts the pool as the cloud reads it. An agent that
takes the drain over (a restart, or another replica leading) knew nothing of it and took the node out again: the
pool read one unit smaller than it was (ready 1, target 1, draining 1 against the cloud's 2 and 2), and a scale-up
bought a replacement for a unit that was serving. Asked when it takes the drain over, the drainer tells it the cloud
is deleting the node, or has deleted it. Real drainer, GKE actuator and clients, on the fake GKE and Kubernetes
APIs."""

from __future__ import annotations

from datetime import datetime, timedelta

from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from agent.daemon.guard import LeaderOnlyDrainer
from agent.drains import NodeDrains
from models import Resize
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import MINUTE, START, _action, _drains, _pool, _removal_went_out
from tests.actuators.test_drain_removal_under_way import _rig as _bounds_rig
from tests.actuators.test_drain_unmark_fails_after_removal import _removed_unmark_refused, _rig
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

Counts = tuple[tuple[int, int], tuple[int, int, int]]


def _counts(drains: NodeDrains, gke: GkeNodePoolActuator, clock: SimulatedClock) -> Counts:
    """The pool as the cloud reads it (ready, target) and as the agent sees it (ready, target, draining)."""
    cloud = {state.pool_id: state for state in gke.list_pools()}
    seen, _ = drains.observe(cloud, clock.now())
    read, agent = cloud["gpu"], seen["gpu"]
    return (read.ready_units, read.target_units), (agent.ready_units, agent.target_units, agent.draining_units)


def test_a_new_leader_after_a_removal_whose_unmarking_failed_counts_the_pool_as_the_cloud_does(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removed_unmark_refused(run, kube_api, gke_api, clock)
    gke, _, _ = _drains(kube_client, gke_api, clock, move_bounds=False)
    clock.advance(MINUTE)
    assert _counts(run.drains, gke, clock) == ((2, 2), (2, 2, 0))  # the replica that sent the removal

    _, _, taken_over = _drains(kube_client, gke_api, clock, move_bounds=False)
    assert _counts(taken_over, gke, clock) == ((2, 2), (2, 2, 0))  # was (1, 1, 1)
    assert [p.node for p in taken_over.pending] == [run.node]

    gke_api.advance()  # the instance is gone; its Node object outlives it a while
    _, _, after_it_went = _drains(kube_client, gke_api, clock, move_bounds=False)
    assert _counts(after_it_went, gke, clock) == ((2, 2), (2, 2, 0))  # was (1, 1, 1)


def test_a_new_leader_while_the_cloud_deletes_a_node_under_move_bounds_counts_the_pool_as_the_cloud_does(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _bounds_rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)
    assert _action(gke_api, run.node) == "DELETING"
    gke, _, _ = _drains(kube_client, gke_api, clock)
    clock.advance(MINUTE)
    assert _counts(run.drains, gke, clock) == ((2, 2), (2, 2, 0))

    _, _, taken_over = _drains(kube_client, gke_api, clock)
    assert _counts(taken_over, gke, clock) == ((2, 2), (2, 2, 0))  # was (1, 1, 1)
    taken_over.continue_pending(clock.now())  # its step waits for the deletion: counted the same
    clock.advance(MINUTE)
    assert _counts(taken_over, gke, clock) == ((2, 2), (2, 2, 0))


def test_a_drain_taken_over_whose_node_the_cloud_keeps_is_counted_as_draining(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """The other side: a drain taken over before any removal went out (its node running) is taken out of the pool's
    ready and target units, as the replica that started it took it out."""
    clock = SimulatedClock(START)
    node = _pool(kube_api, gke_api, clock, move_bounds=False)[0]
    gke, _, drains = _drains(kube_client, gke_api, clock, move_bounds=False)
    drains.scale_down(Resize("gpu", 3, 2, "idle", "release"), clock.now(), [node])
    clock.advance(timedelta(seconds=30))
    assert _counts(drains, gke, clock) == ((3, 3), (2, 2, 1))

    _, _, taken_over = _drains(kube_client, gke_api, clock, move_bounds=False)
    assert _counts(taken_over, gke, clock) == ((3, 3), (2, 2, 1))
    assert [p.node for p in taken_over.pending] == [node]


class _Leading:
    def is_leader(self, now: datetime) -> bool:
        return True


def test_the_daemons_leader_only_drainer_tells_the_cloud_s_removals_through(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """The daemon hands ``NodeDrains`` each drainer wrapped in ``LeaderOnlyDrainer``: a drain taken over while the
    cloud deletes its node is counted as the cloud counts it through the wrapper too (it read (1, 1, 1) while the
    wrapper did not pass the drainer's removal_state through)."""
    clock = SimulatedClock(START)
    run = _bounds_rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)
    gke, drainer, _ = _drains(kube_client, gke_api, clock)
    clock.advance(MINUTE)

    taken_over = NodeDrains({"gpu": LeaderOnlyDrainer(drainer, _Leading(), clock)}, timedelta(0))
    assert _counts(taken_over, gke, clock) == ((2, 2), (2, 2, 0))
