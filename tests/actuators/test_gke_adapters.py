"""What only the real GKE and Cloud TPU adapters do (beyond the shared contract): GKE autoscaling coexistence,
stockouts that show up after the call, error translation, operations running across a restart, slice and queued
resource bodies, failed units, paging and request ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

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
from tests.fakes.gke_api import FakeGkeApi, Operation
from tests.fakes.tpu_api import FakeTpuApi

CLOCK = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
MAPPING = NodePoolMapping(pool="gpu", node_pool="a100")


def _node_pools(fake: FakeGkeApi, mode: str = "refuse") -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling=mode)  # type: ignore[arg-type]
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], CLOCK)


def _resized_through_gke(fake: FakeGkeApi, per_zone: int) -> None:
    """The pool resized by hand through GKE (``gcloud container clusters resize``): one setSize, a GKE operation that
    runs until its groups' creates are done or given up on. The agent itself never sends one."""
    google_clients(fake.url).gke.set_node_pool_size(
        request={"name": f"{CLUSTER}/nodePools/a100", "node_count": per_zone}
    )


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


@pytest.mark.parametrize(
    "shown_on",
    [("instances",), ("operation",), ("instances", "operation")],
    ids=["instance-last-attempt", "operation-error", "both"],
)
def test_a_stockout_after_an_accepted_resize_is_failed_units_then_removed_and_refused(
    gke_api: FakeGkeApi, shown_on: tuple[str, ...]
) -> None:
    """Told on the instances, the agent's own resize of the group fails them; told on an operation's error alone,
    the pool was grown through GKE, whose operation ends with the error once it gives up."""
    gke_api.add_pool("a100", nodes=1)
    gke_api.stockout(mode="operation", room=1, shown_on=shown_on)  # room for one more instance, not three
    if "instances" in shown_on:
        assert _node_pools(gke_api).resize("gpu", 4, "up-1").status is ActionStatus.STARTED
        gke_api.advance()  # two of the three new instances cannot be created
    else:
        _resized_through_gke(gke_api, 4)
        gke_api.advance()  # two of the three new instances cannot be created; GKE's operation runs on
        gke_api.advance()  # and ends with their error
    mig = gke_api.pools["a100"].migs[0]
    assert mig.target_size == 4
    actuator = _node_pools(gke_api)  # read from the cloud alone, as after a restart
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 2)
    assert state.in_flight_operation is None
    stuck = [i.name for i in mig.instances if i.action == "CREATING"]

    with pytest.raises(CapacityUnavailable, match="ZONE_RESOURCE_POOL_EXHAUSTED") as refused:
        actuator.resize("gpu", 5, "up-2")
    assert "2 instances could not be created" in str(refused.value)
    assert mig.target_size == 2  # back to what exists
    assert [i.name for i in mig.instances if i.action == "DELETING"] == stuck
    assert gke_api.calls("POST", "/resize") == (1 if "instances" in shown_on else 0)  # the refused one: none
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 0)
    gke_api.advance()
    assert [i.action for i in mig.instances] == ["NONE", "NONE"]


def test_failed_instances_go_first_on_a_resize_that_does_not_grow(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=2)
    gke_api.stockout(mode="operation")
    _node_pools(gke_api).resize("gpu", 4, "up")
    gke_api.advance()
    mig = gke_api.pools["a100"].migs[0]
    ready = [i.name for i in mig.instances if i.action == "NONE"]
    clock = SimulatedClock(CLOCK.now())
    clients = google_clients(gke_api.url)
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [MAPPING], clock)
    same = actuator.resize("gpu", 2, "same")  # already the target once the failed ones are left out
    assert (same.status, same.detail) == (ActionStatus.STARTED, "removed 2 instances that could not be created")
    assert mig.target_size == 2
    gke_api.advance()
    with pytest.raises(CapacityUnavailable, match="zones out of capacity: us-central1-a"):
        actuator.resize("gpu", 3, "backed-off")  # the pool's only zone is backed off for 30 minutes
    clock.advance(timedelta(minutes=30))
    gke_api.stockout(mode="operation")
    actuator.resize("gpu", 3, "up-again")
    gke_api.advance()
    actuator.resize("gpu", 1, "down")  # the failed instance and the newest ready one
    assert mig.target_size == 1
    assert [i.name for i in mig.instances if i.action == "NONE"] == ready[:1]


def test_a_restock_before_the_next_resize_brings_the_stuck_instances_up(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1)
    gke_api.stockout(mode="operation", shown_on=("instances",))
    actuator = _node_pools(gke_api)
    actuator.resize("gpu", 3, "up")
    gke_api.advance()
    assert actuator.list_pools()[0].failed_units == 2
    gke_api.restock()
    gke_api.advance()  # the instance group kept retrying; the zone has room again
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (3, 3, 0)


def test_a_late_stockout_under_move_bounds_moves_the_bounds_to_what_exists(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1, autoscaling={"enabled": True, "minNodeCount": 0, "maxNodeCount": 4})
    actuator = _node_pools(gke_api, "move-bounds")
    gke_api.stockout(mode="operation")
    gke_api.autoscale("a100", 3)  # GKE's own autoscaler grows the pool into the stockout
    gke_api.advance()
    with pytest.raises(CapacityUnavailable):
        actuator.resize("gpu", 3, "up")
    assert gke_api.pools["a100"].spec["autoscaling"] == {
        "enabled": True,
        "totalMinNodeCount": 1,
        "totalMaxNodeCount": 1,
    }
    assert gke_api.pools["a100"].migs[0].target_size == 1


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
        # a quota on API requests is a rate limit, not an exhausted accelerator quota
        (
            429,
            "Quota exceeded for quota metric 'Mutate requests' and limit 'Mutate requests per minute'",
            TransientActuatorError,
        ),
    ],
)
def test_vendor_errors_become_decisions(gke_api: FakeGkeApi, status: int, message: str, error: type[Exception]) -> None:
    gke_api.add_pool("a100", nodes=1)
    gke_api.fail_next(1, status, message, path="/resize")
    with pytest.raises(error):
        _node_pools(gke_api).resize("gpu", 2, "k")


def test_compute_engine_concurrent_operations_quota_is_retried_not_a_quota_stockout(gke_api: FakeGkeApi) -> None:
    """Compute Engine refuses an operation too many with 403 "Rate Limit Exceeded", reason rateLimitExceeded and
    ErrorInfo reason CONCURRENT_OPERATIONS_QUOTA_EXCEEDED: neither a permission problem (the pool would be blocked)
    nor an exhausted accelerator quota (its demand would move to a dearer pool), but a retry on a later tick."""
    gke_api.add_pool("a100", nodes=3)
    names = [i.name for i in gke_api.pools["a100"].migs[0].instances]
    gke_api.fail_next(
        1,
        403,
        "Rate Limit Exceeded",
        path="/deleteInstances",
        reason="rateLimitExceeded",
        info="CONCURRENT_OPERATIONS_QUOTA_EXCEEDED",
    )
    actuator = _node_pools(gke_api)
    with pytest.raises(TransientActuatorError, match=r"Rate Limit Exceeded .*CONCURRENT_OPERATIONS_QUOTA_EXCEEDED"):
        actuator.delete_nodes("gpu", names[2:], "d1")
    assert actuator.delete_nodes("gpu", names[2:], "d2").status is ActionStatus.STARTED


def test_slices_beyond_the_clusters_concurrent_operations_quota_are_created_on_a_later_tick(
    gke_api: FakeGkeApi,
) -> None:
    """Each slice is a node pool created by an operation of its own; GKE refuses one beyond the cluster's quota
    of concurrent operations with 429 "Too many operations". The slices already asked for stay asked for and the
    resize says it started them (so the planner counts the change), the rest follow once operations finish."""
    gke_api.concurrent_operations_quota = 2
    actuator = GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, [SLICES], CLOCK)
    first = actuator.resize("accel", 3, "up")
    assert first.status is ActionStatus.STARTED
    assert first.detail.startswith("target 3 slices: create v5e-0, v5e-1; the rest on a later resize (")
    assert "Too many operations" in first.detail
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units) == (0, 2)
    assert sorted(gke_api.pools) == ["v5e-0", "v5e-1"]
    with pytest.raises(TransientActuatorError, match="Too many operations"):  # nothing can start yet
        actuator.resize("accel", 3, "again")
    gke_api.advance()  # the two creations finish
    assert actuator.resize("accel", 3, "up again").detail == "target 3 slices: create v5e-2"
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units) == (2, 3)


def test_an_unreachable_api_is_transient(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=1)
    actuator = _node_pools(gke_api)
    gke_api.stop()
    assert actuator.list_pools() == []  # the pool is left out, held as unobserved
    assert {pool: type(error) for pool, error in actuator.unread_pools().items()} == {"gpu": TransientActuatorError}
    with pytest.raises(TransientActuatorError):
        actuator.resize("gpu", 2, "k")


def test_an_operation_running_across_a_restart_is_seen_and_not_repeated(gke_api: FakeGkeApi) -> None:
    """The operation of a move of GKE's autoscaler bounds (the only GKE operation a resize starts)."""
    gke_api.add_pool("a100", nodes=1, autoscaling={"enabled": True, "minNodeCount": 0, "maxNodeCount": 4})
    _node_pools(gke_api, "move-bounds").resize("gpu", 3, "k")
    restarted = _node_pools(gke_api, "move-bounds")
    (state,) = restarted.list_pools()
    assert state.in_flight_operation is not None
    assert "update_cluster" in state.in_flight_operation
    assert restarted.resize("gpu", 3, "k").status is ActionStatus.DONE
    with pytest.raises(TransientActuatorError, match="still running"):
        restarted.resize("gpu", 5, "k2")
    assert gke_api.calls("POST", ":setAutoscaling") == 1
    assert gke_api.calls("POST", ":setSize") == 0


def test_scale_down_deletes_named_instances_newest_first(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3)
    names = [i.name for i in gke_api.pools["a100"].migs[0].instances]
    _node_pools(gke_api).resize("gpu", 1, "down")
    assert [i.action for i in gke_api.pools["a100"].migs[0].instances] == ["NONE", "DELETING", "DELETING"]
    assert gke_api.calls("POST", ":setSize") == 0
    result = _node_pools(gke_api).delete_nodes("gpu", [names[0], "stranger"], "d")  # in no group: gone already
    assert result.detail == f"deleting 1 nodes: {names[0]}; stranger gone from its instance group (deleted already)"


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


def test_a_slice_running_with_an_error_is_kept_as_ready_never_deleted_undrained(
    gke_api: FakeGkeApi, caplog: pytest.LogCaptureFixture
) -> None:
    actuator = GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, [SLICES], CLOCK)
    actuator.resize("accel", 2, "up")
    gke_api.advance()
    gke_api.pools["v5e-0"].status = "RUNNING_WITH_ERROR"
    gke_api.pools["v5e-0"].status_message = "1 node is unhealthy"
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 0)
    assert actuator.resize("accel", 2, "clear-failed").status is ActionStatus.DONE  # nothing to clean up
    assert gke_api.calls("DELETE", "/nodePools/") == 0
    assert "slice v5e-0 runs with an error, counted as ready: 1 node is unhealthy" in caplog.text


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
    with pytest.raises(CapacityUnavailable, match="suspended: insufficient capacity"):  # the TPU was taken back
        actuator.resize("accel", 60, "refill")
    assert tpu_api.state_of("v5e-3") == "DELETING"  # failed ones are deleted all the same
    assert tpu_api.state_of("v5e-7") == "DELETING"


def test_queued_resource_stockout_and_spot_body(tpu_api: FakeTpuApi) -> None:
    clock = SimulatedClock(CLOCK.now())
    tpu_api.clock = clock.now
    actuator = CloudTpuQueuedResourceActuator(google_clients(tpu_api.url).tpu, "test-project", [QUEUED], clock)
    tpu_api.stockout(mode="wait")
    actuator.resize("accel", 1, "up")
    assert "guaranteed" in tpu_api.queued["v5e-0"]
    clock.advance(timedelta(hours=1))  # the request's valid-until time (the default wait)
    tpu_api.advance()
    assert tpu_api.state_of("v5e-0") == "FAILED"
    with pytest.raises(CapacityUnavailable, match="insufficient capacity: expired waiting for resources"):
        actuator.resize("accel", 1, "again")
    tpu_api.stockout(mode="http")
    with pytest.raises(CapacityUnavailable, match="Quota"):
        actuator.resize("accel", 2, "quota")


def test_operations_of_another_cluster_in_the_location_are_not_the_pools(gke_api: FakeGkeApi) -> None:
    """GKE lists the operations of every cluster in the location; a pool of the same name in another cluster is
    not this pool: its running operation does not hold ours, and its stockout does not fail our instances."""
    gke_api.add_pool("a100", nodes=1)
    other = f"/projects/{gke_api.project}/locations/{gke_api.location}/clusters/other/nodePools/a100"
    gke_api.operations["operation-x-running"] = Operation("operation-x-running", "SET_NODE_POOL_SIZE", other)
    failed = {"code": 8, "message": "[ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS] zones/us-central1-a"}
    gke_api.operations["operation-y-failed"] = Operation(
        "operation-y-failed",
        "SET_NODE_POOL_SIZE",
        other,
        "DONE",
        failed,
        "2024-05-01T00:00:01Z",
        "2024-05-01T00:00:02Z",
    )
    actuator = _node_pools(gke_api)
    assert actuator.resize("gpu", 2, "up").status is ActionStatus.STARTED  # not held by operation-x-running
    (state,) = actuator.list_pools()
    assert state.in_flight_operation is None  # a group resize starts no GKE operation; the other pool's is not ours
    assert state.failed_units == 0


def test_a_stockout_an_operation_ended_with_is_forgotten_after_the_zone_backoff(gke_api: FakeGkeApi) -> None:
    """Instances being created long after a failed operation were asked for by a later instance group resize
    (GKE's autoscaler, or the agent's own per-zone resizes), not by that operation."""
    gke_api.add_pool("a100", nodes=1)
    gke_api.stockout(mode="operation", shown_on=("operation",))
    clock = SimulatedClock(CLOCK.now())
    clients = google_clients(gke_api.url)
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [MAPPING], clock)
    _resized_through_gke(gke_api, 2)
    gke_api.advance()  # the creates fail
    gke_api.advance()  # the operation ends with the stockout; its instance is a failed unit
    assert actuator.list_pools()[0].failed_units == 1
    gke_api.restock()
    gke_api.advance()  # the zone has room again: the stuck instance comes up
    clock.advance(timedelta(minutes=45))
    gke_api.now += timedelta(minutes=45)
    gke_api.autoscale("a100", 4)  # two more instances being created, by a resize that started no operation
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 4, 0)


def test_a_node_pool_created_without_zones_spans_every_zone_of_a_regional_cluster(gke_api: FakeGkeApi) -> None:
    """Why a slice group in a regional cluster must name its zone: GKE creates ``initialNodeCount`` nodes in each
    of the cluster's zones."""
    unzoned = SLICES.model_copy(update={"zone": None})
    GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, [unzoned], CLOCK).resize("accel", 1, "up")
    pool = gke_api.pools["v5e-0"]
    assert [m.zone for m in pool.migs] == ["us-central1-a", "us-central1-b", "us-central1-c"]
    assert sum(m.target_size for m in pool.migs) == 12  # three times the slice's four hosts
    zoned = GkeTpuSliceActuator(google_clients(gke_api.url).gke, CLUSTER, [SLICES], CLOCK)
    zoned.resize("accel", 2, "up-zoned")
    assert [(m.zone, m.target_size) for m in gke_api.pools["v5e-1"].migs] == [("us-central1-a", 4)]
