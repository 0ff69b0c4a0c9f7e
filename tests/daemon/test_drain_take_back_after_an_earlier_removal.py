"""A scale-up never takes back a node whose removal this replica once asked the cloud for, when the cloud cannot be
read: the instance may still be going.

A drain left the node cordoned while GKE deleted it (``leadtime.io/drain-left-deleting``); a person uncordoned it
while the instance was still being deleted, and a later idle drain of this replica took it. A scale-up then takes
that later drain back, and the one read of the instance group answers 503. The later drain was started here and
never asked for the node's removal, so it was ended all the same: the node uncordoned and counted as capacity
regained, while GKE was still deleting it (one node fewer bought, pods scheduled on a VM going away). Any removal
this drainer asked for the node, under whichever drain, now keeps the drain going until the cloud says it keeps the
node. With the read answered, the take-back is refused either way (the cloud says it deletes the node). Once the
cloud keeps the node after all and the leader gives it back (uncordoned by the watch of the drain that left it), that
removal counts no longer: a later drain of it is taken back like any other while the group cannot be read. Whole
daemons on the fake Kubernetes and GKE APIs, one simulated clock."""

from __future__ import annotations

from datetime import datetime

import pytest

from actuators.drain_mark_names import DRAIN_ANNOTATION, LEFT_DELETING_ANNOTATION
from agent.drains import NodeDrains
from models import ActionResult, Resize
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import UNAVAILABLE, _cordoned, _fails_again
from tests.daemon.drain_replicas import (
    DrainReplica,
    drain,
    minute,
    until_left_deleting,
)
from tests.daemon.test_drain_left_deleting_then_drained_again import _annotations, _uncordon
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi


def _action(gke_api: FakeGkeApi, node: str) -> str:
    """The current action of ``node``'s instance in its managed instance group."""
    instances = [i for mig in gke_api.pools["a100"].migs for i in mig.instances if i.name == node]
    assert len(instances) == 1, instances
    return instances[0].action


@pytest.mark.parametrize("read_fails", [False, True], ids=["group read", "group read answers 503"])
def test_a_later_drain_of_a_node_the_cloud_still_deletes_is_not_taken_back(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
    read_fails: bool,
) -> None:
    a, b, node = drain_replicas
    a.loop.acts.append(drain(node))
    until_left_deleting(clock, gke_api, a, b)
    assert _annotations(kube_api, node).get(LEFT_DELETING_ANNOTATION)
    _uncordon(kube_api, node)  # a person uncordons it while the cloud still deletes it
    release = Resize("gpu", 3, 2, "idle", "release3")
    a.loop.acts.append(lambda drains, now: drains.scale_down(release, now, [node]).results)
    minute(clock, a, b)
    assert _annotations(kube_api, node).get(DRAIN_ANNOTATION) == f"release3/drain/{node}"
    minute(clock, a, b)
    taken: list[str] = []

    def take_back(drains: NodeDrains, now: datetime) -> list[ActionResult]:
        if read_fails:
            gke_api.fail_next(1, 503, UNAVAILABLE, path="listManagedInstances")
        taken.extend(drains.take_back("gpu", 1, now))
        return []

    a.loop.acts.append(take_back)
    minute(clock, a, b)

    assert _action(gke_api, node) == "DELETING"
    assert taken == []
    assert _cordoned(kube_api, node)
    assert [p.key for p in a.drains.pending] == [f"release3/drain/{node}"]


def test_a_node_the_cloud_kept_after_all_is_taken_back_while_the_group_cannot_be_read(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
) -> None:
    a, b, node = drain_replicas
    a.loop.acts.append(drain(node))
    until_left_deleting(clock, gke_api, a, b)
    assert _annotations(kube_api, node).get(LEFT_DELETING_ANNOTATION)
    _fails_again(gke_api, node)  # the cloud keeps the instance after all
    minute(clock, a, b)  # the leader's watch gives the node back
    assert not _cordoned(kube_api, node) and not _annotations(kube_api, node).get(LEFT_DELETING_ANNOTATION)
    release = Resize("gpu", 3, 2, "idle", "release3")
    a.loop.acts.append(lambda drains, now: drains.scale_down(release, now, [node]).results)
    minute(clock, a, b)
    assert _cordoned(kube_api, node)
    taken: list[str] = []

    def take_back(drains: NodeDrains, now: datetime) -> list[ActionResult]:
        gke_api.fail_next(1, 503, UNAVAILABLE, path="listManagedInstances")
        taken.extend(drains.take_back("gpu", 1, now))
        return []

    a.loop.acts.append(take_back)
    minute(clock, a, b)

    assert _action(gke_api, node) == "NONE"
    assert taken == [node]
    assert not _cordoned(kube_api, node)
