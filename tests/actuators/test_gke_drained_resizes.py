"""A GKE node pool whose nodes a drainer removes never shrinks by a resize: the executor's removal of failed units
sends the target it read at the start of the tick, and the adapter reads the pool again; a failed instance that came
up in between made that target one short, and the resize deleted the newest ready node of the fullest zone, busy or
not, with no cordon and no eviction. Such a resize is now rejected, deleting only the instances failed as read now."""

from __future__ import annotations

from datetime import UTC, datetime

from actuators.cloud_wiring import build_cloud_actuators
from actuators.gke_node_pool import GkeNodePoolActuator
from config.cloud import CloudSettings, NodePoolMapping
from models import ActionStatus
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
START = datetime(2024, 5, 1, tzinfo=UTC)


def _drained(fake: FakeGkeApi, clock: SimulatedClock) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], clock, drained=True)


def _actions(fake: FakeGkeApi) -> dict[str, str]:
    return {i.name: i.action for m in fake.pools["a100"].migs for i in m.instances}


def test_a_failed_instance_that_came_up_before_its_removal_leaves_every_node_in_place(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=9, zones=ZONES)
    gke_api.stockout("us-central1-b", mode="operation", shown_on=("instances",))
    clock = SimulatedClock(START)
    actuator = _drained(gke_api, clock)
    actuator.resize("gpu", 12, "up")
    gke_api.advance()  # zone b cannot create its new node
    (state,) = actuator.list_pools()  # the tick's read
    assert (state.ready_units, state.target_units, state.failed_units) == (11, 11, 1)
    gke_api.restock()
    gke_api.advance()  # the group's retry creates it a moment later

    result = actuator.resize("gpu", state.target_units, "gpu->clear-failed")  # what the removal of failed units sends

    assert result.status is ActionStatus.REJECTED
    assert "pool changed since the plan: it holds 12 nodes, more than the 11 asked" in result.detail
    assert set(_actions(gke_api).values()) == {"NONE"}  # nothing deleted
    assert gke_api.calls("POST", "/deleteInstances") == 0
    assert actuator.resize("gpu", state.target_units, "gpu->clear-failed") == result  # the same key, the same answer


def test_only_the_instances_failed_as_read_now_are_deleted(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=9, zones=ZONES)
    gke_api.stockout("us-central1-b", mode="operation", shown_on=("instances",))
    clock = SimulatedClock(START)
    actuator = _drained(gke_api, clock)
    actuator.resize("gpu", 15, "up")  # 5 in each zone
    gke_api.advance()  # both of zone b's new nodes fail
    (state,) = actuator.list_pools()
    assert (state.target_units, state.failed_units) == (13, 2)
    gke_api.stockout("us-central1-b", mode="operation", room=1, shown_on=("instances",))
    gke_api.advance()  # one of them comes up after all
    still_failed = [i.name for i in gke_api.pools["a100"].migs[1].instances if i.action == "CREATING"]
    assert len(still_failed) == 1

    result = actuator.resize("gpu", state.target_units, "gpu->clear-failed")

    assert result.status is ActionStatus.REJECTED
    assert result.detail.startswith("removed 1 instances that could not be created; pool changed since the plan")
    assert [n for n, action in _actions(gke_api).items() if action == "DELETING"] == still_failed
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [5, 4, 5]


def test_a_scale_up_planned_on_an_older_read_is_not_turned_into_a_shrink(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=6, zones=ZONES)
    actuator = _drained(gke_api, SimulatedClock(START))
    (state,) = actuator.list_pools()
    assert state.target_units == 6
    gke_api.autoscale("a100", 9)  # the pool grew after the plan read it (someone resized it)
    gke_api.advance()

    result = actuator.resize("gpu", state.target_units + 2, "up")  # the plan's 6 -> 8

    assert result.status is ActionStatus.REJECTED
    assert "holds 9 nodes, more than the 8 asked" in result.detail
    assert set(_actions(gke_api).values()) == {"NONE"}
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [3, 3, 3]


def test_the_daemons_node_pool_adapter_is_drained(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100-pool", nodes=3, zones=ZONES)
    cloud = CloudSettings.model_validate(
        {
            "project": "test-project",
            "location": "us-central1",
            "cluster": "ml",
            "endpoint": gke_api.url,
            "node_pools": [{"pool": "a100", "node_pool": "a100-pool"}],
        }
    )
    built = build_cloud_actuators(cloud, SimulatedClock(START))

    result = built.router.resize("a100", 2, "down")

    assert result.status is ActionStatus.REJECTED
    assert {i.action for m in gke_api.pools["a100-pool"].migs for i in m.instances} == {"NONE"}
    assert [m.target_size for m in gke_api.pools["a100-pool"].migs] == [1, 1, 1]
