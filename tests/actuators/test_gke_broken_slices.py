"""GkeTpuSliceActuator with its group's KubernetesSliceDrainer, on the fake GKE, Compute Engine and Kubernetes APIs,
for a slice GKE reports in ERROR with a job's pod on it and hosts missing: it cannot run the multi-host job and the
pod keeps it busy, so it is broken, counted neither ready nor in the target (a slice is asked for in its place),
never deleted while busy, no unit of the drainer's, and reported with the hosts it lacks. Its hosts are counted as a
RUNNING_WITH_ERROR slice's are."""

from __future__ import annotations

import pytest

from models import ActionStatus, CapacityUnavailable
from tests.actuators.test_gke_slice_errors import STOCKOUT, Rig, rig  # noqa: F401  (the fixture)
from tests.contract.harnesses import POOL
from tests.fakes.gke_api import STOCKOUT_MESSAGE


@pytest.fixture
def slices(rig: Rig) -> Rig:  # noqa: F811
    """The slice-error rig: two running 4-host slices of group v5e, every host registered and running a DaemonSet's
    pod."""
    return rig


def _lose_hosts(slices: Rig, name: str, keep: int) -> None:
    """The slice's instance groups hold only their last ``keep`` instances (the others deleted, not recreated)."""
    for mig in slices.gke.pools[name].migs:
        mig.instances = mig.instances[-keep:]
        mig.target_size = len(mig.instances)


def test_an_error_slice_short_of_hosts_with_a_job_on_it_is_broken_replaced_and_never_deleted(slices: Rig) -> None:
    slices.train("v5e-1")  # the job's pod on the slice's last host
    _lose_hosts(slices, "v5e-1", keep=1)
    slices.gke.report_error("v5e-1", conditions=(STOCKOUT,))

    (state,) = slices.actuator.list_pools()

    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 0)
    ((name, why),) = state.broken_units
    assert name == "v5e-1"
    assert why == "in ERROR with work on it and 1 of 4 hosts running; missing: 3 not in its instance groups"
    assert slices.actuator.ready_slices(POOL) == ["v5e-0"]  # not a unit its drainer could drain
    assert slices.drainer.pool_nodes(POOL) == ["v5e-0"]
    assert slices.actuator.resize(POOL, 1, "clear-failed").status is ActionStatus.DONE  # nothing failed to delete
    grown = slices.actuator.resize(POOL, 2, "replace")  # the planner's 2 slices: one asked for in its place
    assert (grown.status, grown.detail) == (ActionStatus.STARTED, "target 2 slices: create v5e-2")
    assert slices.gke.calls("DELETE", "/nodePools/") == 0
    assert slices.gke.pools["v5e-1"].status == "ERROR"

    slices.kube.delete("pods", "train-gke-ml-v5e-1-host-3", "default")  # the job ends: nothing runs on it any more
    (state,) = slices.actuator.list_pools()
    assert (state.ready_units, state.failed_units, state.broken_units) == (1, 1, ())
    slices.actuator.resize(POOL, state.target_units, "clear-failed again")
    assert slices.gke.pools["v5e-1"].status == "STOPPING"  # a failed slice, deleted as before


def test_a_broken_slice_names_the_hosts_being_recreated_and_its_stockout_refuses_a_slice_in_its_zone(
    slices: Rig,
) -> None:
    slices.train("v5e-1")
    (mig,) = slices.gke.pools["v5e-1"].migs
    for instance in mig.instances[:2]:  # two hosts recreated by their group, the zone out of TPUs
        instance.action, instance.error = "CREATING", STOCKOUT_MESSAGE
    slices.gke.report_error("v5e-1", conditions=(STOCKOUT,))

    (state,) = slices.actuator.list_pools()

    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 0)
    ((name, why),) = state.broken_units
    assert name == "v5e-1"
    lacking = ", ".join(i.name for i in mig.instances[:2])
    assert why.startswith(f"in ERROR with work on it and 2 of 4 hosts running; missing: {lacking} (")
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in why
    with pytest.raises(CapacityUnavailable, match="2 of 4 hosts running"):
        slices.actuator.resize(POOL, 2, "replace")  # backs the group off: the planner uses its next pool
    assert set(slices.gke.pools) == {"v5e-0", "v5e-1"}
    assert slices.gke.calls("DELETE", "/nodePools/") == 0


def test_an_error_slice_with_a_job_on_it_and_every_host_running_is_still_a_ready_slice(slices: Rig) -> None:
    slices.train("v5e-1")
    slices.gke.report_error("v5e-1", conditions=(STOCKOUT,))
    (state,) = slices.actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units, state.broken_units) == (2, 2, 0, ())
    assert slices.actuator.ready_slices(POOL) == ["v5e-0", "v5e-1"]
