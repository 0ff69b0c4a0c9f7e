"""A drain in progress that leaves the cluster's record by someone else's hand (a person uncordons its node) is
forgotten with a log line naming it, its node and its key, not silently: the drain then has no result of its own, and
the log is where an operator finds what became of it. Real drainer and GKE actuator on the fake APIs."""

from __future__ import annotations

import logging

import pytest
from kubernetes import client as k8s

from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import START, _cordoned, _rig, _step
from tests.daemon.test_drain_left_deleting_then_drained_again import _uncordon
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi


def test_a_drain_whose_node_a_person_uncordoned_is_forgotten_with_a_log_line(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi, caplog: pytest.LogCaptureFixture
) -> None:
    clock = SimulatedClock(START)
    run = _rig(kube_api, kube_client, gke_api, clock)
    _step(run, clock)
    assert _cordoned(kube_api, run.node) and [p.key for p in run.drains.pending] == [run.key]
    _uncordon(kube_api, run.node)  # kubectl uncordon: the cordon alone

    with caplog.at_level(logging.INFO, logger="agent.drains"):
        _step(run, clock)

    assert run.drains.pending == ()
    forgotten = [r.getMessage() for r in caplog.records if "no longer in the cluster's record" in r.getMessage()]
    assert len(forgotten) == 1, caplog.text
    assert run.node in forgotten[0] and run.key in forgotten[0] and "pool gpu" in forgotten[0]
