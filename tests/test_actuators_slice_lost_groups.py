"""A TPU slice whose node pool lists an instance group Compute Engine does not find (404: GKE may still list a
group that is gone) holds no host there: the slice is short of hosts (in flight if GKE reports it
RUNNING_WITH_ERROR, broken if it is in ERROR with a job on it), with a warning naming the group. Before, the 404 of
that one group left the whole slice group unread and failed every resize of it as a permanent error, which blocks a
pool. A read made for a change that fails for good now fails the change as a transient error. GkeTpuSliceActuator
on the fake GKE, Compute Engine and Kubernetes APIs."""

from __future__ import annotations

import logging

import pytest

from models import ActionStatus, TransientActuatorError
from tests.actuators.test_gke_slice_errors import Rig, rig  # noqa: F401  (the fixture)
from tests.contract.harnesses import POOL, SLICES

GROUP = "gke-ml-v5e-1-0-grp"  # the fake's name for slice v5e-1's instance group in us-central1-a


@pytest.fixture
def slices(rig: Rig) -> Rig:  # noqa: F811
    """Two running 4-host slices of group v5e, every host registered and running a DaemonSet's pod."""
    return rig


def test_a_slice_whose_instance_group_is_gone_is_in_flight_and_its_group_is_still_read_and_resized(
    slices: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    slices.gke.report_error("v5e-1", status="RUNNING_WITH_ERROR", message="1 node is being recreated")
    slices.gke.lose_group("v5e-1", "us-central1-a")

    with caplog.at_level(logging.WARNING, logger="actuators.gke_tpu_slices"):
        (state,) = slices.actuator.list_pools()

    assert slices.actuator.unread_pools() == {}
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 2, 0)  # v5e-1 in flight, not ready
    assert slices.actuator.ready_slices(POOL) == ["v5e-0"]
    assert "slice v5e-1 has an instance group that was not found (404)" in caplog.text
    assert f"{GROUP} of zone us-central1-a" in caplog.text
    grown = slices.actuator.resize(POOL, 3, "up")
    assert (grown.status, grown.detail) == (ActionStatus.STARTED, "target 3 slices: create v5e-2")


def test_an_error_slice_at_work_whose_instance_group_is_gone_is_broken_naming_the_group(slices: Rig) -> None:
    slices.train("v5e-1")  # its nodes are still registered, a job's pod on one of them
    slices.gke.report_error("v5e-1")
    slices.gke.lose_group("v5e-1", "us-central1-a")

    (state,) = slices.actuator.list_pools()

    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 0)
    ((name, why),) = state.broken_units
    assert name == "v5e-1"
    assert why == (
        f"in ERROR with work on it and 0 of {SLICES.hosts_per_slice} hosts running; missing: "
        f"{SLICES.hosts_per_slice} not in its instance groups (instance group {GROUP} of zone us-central1-a not "
        "found (404))"
    )
    assert slices.gke.calls("DELETE", "/nodePools/") == 0


def test_a_read_for_a_resize_that_fails_for_good_fails_the_resize_as_transient(slices: Rig) -> None:
    """A refused permission on an instance group's instances leaves the group unread (held, a critical alert), and a
    resize that meets it sends nothing and is retried on a later tick instead of blocking the pool."""
    slices.gke.report_error("v5e-1", status="RUNNING_WITH_ERROR", message="1 node is being recreated")
    denied = "Required 'compute.instanceGroupManagers.get' permission for 'projects/test-project'"
    slices.gke.fail_next(1, 403, denied, path="/listManagedInstances")

    with pytest.raises(TransientActuatorError, match="could not be read for the change, nothing sent: HTTP 403"):
        slices.actuator.resize(POOL, 3, "up")

    assert slices.gke.calls("POST", "/nodePools") == 0
