"""The remedy for a broken TPU slice (stop its job; the agent then deletes the idle slice) is no stockout: the slice,
in ERROR after it lost hosts with nothing said of capacity, is failed once its job ends and is deleted with no
back-off and no stockout alert. A slice in ERROR whose node pool names a stockout still backs its group off."""

from __future__ import annotations

from datetime import timedelta

from agent.executor import clear_failed_units
from agent.planning import PlannerMemory
from models import AcceleratorFamily, AlertKind, CapacityTier, PoolKind, PoolSpec
from tests.actuators.test_gke_broken_slices import _lose_hosts
from tests.actuators.test_gke_slice_errors import STOCKOUT, Rig, rig  # noqa: F401  (the fixture)
from tests.contract.harnesses import POOL

SPEC = PoolSpec(
    POOL, PoolKind.TPU_SLICE_GROUP, CapacityTier.ON_DEMAND, AcceleratorFamily.TPU, 16, 0, 4, 20.0,
    timedelta(minutes=30), ("tpu",),
)  # fmt: skip


def test_the_slice_left_by_a_stopped_job_is_deleted_with_no_back_off(rig: Rig) -> None:  # noqa: F811
    rig.train("v5e-1")
    _lose_hosts(rig, "v5e-1", keep=1)
    rig.gke.report_error("v5e-1", conditions=())  # hosts lost, no stockout named
    rig.kube.delete("pods", "train-gke-ml-v5e-1-host-3", "default")  # a person stops the job
    (state,) = rig.actuator.list_pools()
    assert (state.failed_units, state.broken_units) == (1, ())

    done = clear_failed_units({POOL: state}, rig.actuator, {POOL: SPEC}, PlannerMemory(), state.observed_at)

    assert [r.detail for r in done.results] == ["target 1 slices: delete v5e-1"]
    assert rig.gke.pools["v5e-1"].status == "STOPPING"
    assert (done.alerts, done.memory.backoff_until) == ((), {})


def test_a_failed_slice_whose_node_pool_names_a_stockout_backs_the_group_off(rig: Rig) -> None:  # noqa: F811
    rig.gke.report_error("v5e-1", conditions=(STOCKOUT,))  # nothing runs on it: a failed slice
    (state,) = rig.actuator.list_pools()
    assert state.failed_units == 1

    done = clear_failed_units({POOL: state}, rig.actuator, {POOL: SPEC}, PlannerMemory(), state.observed_at)

    assert rig.gke.pools["v5e-1"].status == "STOPPING"
    assert done.memory.in_backoff(POOL, state.observed_at)
    assert [a.kind for a in done.alerts] == [AlertKind.STOCKOUT]
