"""What only the real GKE and Cloud TPU adapters do (beyond the shared contract): GKE autoscaling coexistence,
stockouts that show up after the call, error translation, operations running across a restart, slice and queued
resource bodies, failed units, paging and request ids."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from config.cloud import NodePoolMapping
from models import (
    ActionStatus,
    CapacityUnavailable,
    PermanentActuatorError,
    TransientActuatorError,
)
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, QUEUED, SLICES
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.tpu_api import FakeTpuApi

CLOCK = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))


def _node_pools(fake: FakeGkeApi, mode: str = "refuse") -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling=mode)  # type: ignore[arg-type]
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], CLOCK)


def test_a_pool_with_gke_autoscaling_on_is_refused_by_default(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=2, autoscaling={"enabled": True, "minNodeCount": 0, "maxNodeCount": 4})
    with pytest.raises(PermanentActuatorError, match="GKE autoscaling is on"):
        _node_pools(gke_api).resize("gpu", 3, "k")
    assert gke_api.calls("POST", ":setSize") == 0


def test_move_bounds_sets_the_autoscaler_bounds_to_the_target(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=2, autoscaling={"enabled": True, "minNodeCount": 0, "maxNodeCount": 4})
    result = _node_pools(gke_api, "move-bounds").resize("gpu", 3, "k")
    assert result.status is ActionStatus.STARTED
    assert gke_api.pools["a100"].spec["autoscaling"] == {
        "enabled": True,
        "totalMinNodeCount": 3,
        "totalMaxNodeCount": 3,
    }
    assert gke_api.calls("POST", ":setSize") == 0


def test_a_stockout_found_after_the_call_refuses_the_next_scale_up(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1)
    actuator = _node_pools(gke_api)
    gke_api.stockout(mode="operation")
    assert actuator.resize("gpu", 3, "up-1").status is ActionStatus.STARTED
    gke_api.advance()  # the operation ends; the instances cannot be created
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units) == (1, 3)
    with pytest.raises(CapacityUnavailable, match="ZONE_RESOURCE_POOL_EXHAUSTED"):
        actuator.resize("gpu", 4, "up-2")
    assert actuator.resize("gpu", 1, "down").status is ActionStatus.STARTED  # giving up the stuck ones is allowed


@pytest.mark.parametrize(
    ("status", "message", "error"),
    [
        (429, "Rate limit exceeded", TransientActuatorError),
        (500, "backend error", TransientActuatorError),
        (503, "unavailable", TransientActuatorError),
        (403, "Permission denied on resource", PermanentActuatorError),
        (404, "Not found: node pool", PermanentActuatorError),
        (400, "Invalid argument: nodeCount", PermanentActuatorError),
        (403, "Insufficient regional quota to satisfy request: QUOTA_EXCEEDED", CapacityUnavailable),
        (429, "Quota 'TPUS' exhausted", CapacityUnavailable),
    ],
)
def test_vendor_errors_become_decisions(gke_api: FakeGkeApi, status: int, message: str, error: type[Exception]) -> None:
    gke_api.add_pool("a100", nodes=1)
    gke_api.fail_next(1, status, message, path=":setSize")
    with pytest.raises(error):
        _node_pools(gke_api).resize("gpu", 2, "k")


def test_an_unreachable_api_is_transient(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1)
    actuator = _node_pools(gke_api)
    gke_api.stop()
    with pytest.raises(TransientActuatorError):
        actuator.list_pools()


def test_an_operation_running_across_a_restart_is_seen_and_not_repeated(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1)
    _node_pools(gke_api).resize("gpu", 3, "k")
    restarted = _node_pools(gke_api)
    (state,) = restarted.list_pools()
    assert state.in_flight_operation is not None
    assert "set_node_pool_size" in state.in_flight_operation
    assert restarted.resize("gpu", 3, "k").status is ActionStatus.DONE
    with pytest.raises(TransientActuatorError, match="still running"):
        restarted.resize("gpu", 5, "k2")
    assert gke_api.calls("POST", ":setSize") == 1


def test_scale_down_deletes_named_instances_newest_first(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3)
    names = [i.name for i in gke_api.pools["a100"].migs[0].instances]
    _node_pools(gke_api).resize("gpu", 1, "down")
    assert [i.action for i in gke_api.pools["a100"].migs[0].instances] == ["NONE", "DELETING", "DELETING"]
    assert gke_api.calls("POST", ":setSize") == 0
    with pytest.raises(PermanentActuatorError, match="not instances"):
        _node_pools(gke_api).delete_nodes("gpu", [names[0], "stranger"], "d")


def test_slices_are_created_whole_with_their_topology(gke_api: FakeGkeApi) -> None:
    actuator = GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, [SLICES], CLOCK)
    actuator.resize("accel", 2, "up")
    created = gke_api.pools["v5e-1"].spec
    assert created["placementPolicy"] == {"type": 1, "tpuTopology": "4x4"}  # COMPACT; REST sends enums as ints
    assert created["initialNodeCount"] == 4  # 16 chips of a 4x4 topology, 4 chips per host
    assert created["config"]["machineType"] == "ct5lp-hightpu-4t"
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units) == (0, 2)


def test_a_slice_that_failed_for_capacity_is_reported_cleaned_up_and_refuses_growth(gke_api: FakeGkeApi) -> None:
    actuator = GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, [SLICES], CLOCK)
    gke_api.stockout(mode="operation")
    actuator.resize("accel", 1, "up")
    gke_api.advance()
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (0, 0, 1)
    with pytest.raises(CapacityUnavailable):
        actuator.resize("accel", 1, "again")
    assert gke_api.pools["v5e-0"].status == "STOPPING"


def test_queued_resources_page_and_report_failed_and_suspended(tpu_api: FakeTpuApi) -> None:
    actuator = CloudTpuQueuedResourceActuator(google_clients(tpu_api.url).tpu, "test-project", [QUEUED], CLOCK)
    actuator.resize("accel", 60, "up")  # more than one page of the list
    tpu_api.advance()
    tpu_api.advance()
    tpu_api.set_state("v5e-3", "SUSPENDED")
    tpu_api.set_state("v5e-7", "FAILED", error="internal error")
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (58, 58, 2)
    assert tpu_api.calls("GET", "/queuedResources") >= 2
    actuator.resize("accel", 60, "refill")  # failed ones are deleted, their names reused once gone
    assert tpu_api.state_of("v5e-3") == "DELETING"
    assert tpu_api.state_of("v5e-60") == "WAITING_FOR_RESOURCES"


def test_queued_resource_stockout_and_spot_body(tpu_api: FakeTpuApi) -> None:
    actuator = CloudTpuQueuedResourceActuator(google_clients(tpu_api.url).tpu, "test-project", [QUEUED], CLOCK)
    tpu_api.stockout(mode="fail")
    actuator.resize("accel", 1, "up")
    assert "guaranteed" in tpu_api.queued["v5e-0"]
    tpu_api.advance()
    with pytest.raises(CapacityUnavailable, match="stockout"):
        actuator.resize("accel", 1, "again")
    tpu_api.stockout(mode="http")
    with pytest.raises(CapacityUnavailable, match="Quota"):
        actuator.resize("accel", 2, "quota")
