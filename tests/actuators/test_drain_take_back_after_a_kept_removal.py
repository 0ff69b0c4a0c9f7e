"""A node whose removal the cloud did not carry out, uncordoned to serve again, is taken back for a scale-up like any
other idle drain when the cloud cannot be read.

A drain's removal went out (deleteInstances taken, the autoscaler bounds' move answered 503), then the cloud kept the
instance: the drain was given up and the node uncordoned. Hours later, in the same term, an idle drain of the same
node is taken back for a scale-up while the instance group's read answers 503. The drainer still counted the old
removal as asked for, and refused the take-back as if the node might be going: a node was bought while an idle one,
not being deleted, stayed cordoned. A removal asked for counts no longer once its drain is given up with the unit
uncordoned (the cloud keeps it), nor once the unit is removed. Real drainer, GKE actuator and clients, on the fake GKE
and Kubernetes APIs."""

from __future__ import annotations

from datetime import timedelta

from kubernetes import client as k8s

from models import ActionStatus, Resize
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import (
    START,
    UNAVAILABLE,
    _cordoned,
    _fails_again,
    _removal_went_out,
    _rig,
    _step,
)
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi


def test_a_later_drain_of_a_node_the_cloud_kept_is_taken_back_while_the_group_cannot_be_read(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _removal_went_out(run, gke_api, clock)
    _fails_again(gke_api, run.node)  # the cloud keeps the instance
    [ended] = _step(run, clock)
    assert ended.status is ActionStatus.FAILED and not _cordoned(kube_api, run.node)  # given up: it serves again
    kube_api.delete("pods", "web", "default")  # its stuck pod goes at last: the node is idle
    for _ in range(3):
        clock.advance(timedelta(hours=1))
        run.drains.observe({}, clock.now())
    later = run.drains.scale_down(Resize("gpu", 3, 2, "idle", "release2"), clock.now(), [run.node]).results
    assert [r.status for r in later] == [ActionStatus.STARTED] and _cordoned(kube_api, run.node)

    gke_api.fail_next(1, 503, UNAVAILABLE, path="listManagedInstances")
    taken = run.drains.take_back("gpu", 1, clock.now())

    assert taken == [run.node]
    assert not _cordoned(kube_api, run.node)
    instances = [i for mig in gke_api.pools["a100"].migs for i in mig.instances if i.name == run.node]
    assert [i.action for i in instances] == ["NONE"]  # not being deleted: taking it back was right
