"""A GKE operation whose error names several zones out of capacity fails the instances of every zone it names.

GKE writes a stockout of several zones as one error with a sentence per zone ("The zone '.../us-central1-c' does not
have enough resources ... The zone '.../us-central1-b' ..."; cluster-toolkit pull request 6278). Only the first zone
named was read, so the others' instances still being created counted as coming, their zones were not backed off, and
the next resize moved the failed zone's share into zones just as short.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from config.cloud import NodePoolMapping
from models import ActionStatus, CapacityUnavailable
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
START = datetime(2024, 5, 1, tzinfo=UTC)


def _actuator(fake: FakeGkeApi, clock: SimulatedClock) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], clock, drained=True)


def _resized_through_gke(fake: FakeGkeApi, per_zone: int) -> None:
    """The pool resized by hand through GKE (``gcloud container clusters resize``): one setSize, a GKE operation that
    ends with the error once GKE gives up on the creates, the step after they fail. The agent never sends one."""
    google_clients(fake.url).gke.set_node_pool_size(
        request={"name": f"{CLUSTER}/nodePools/a100", "node_count": per_zone}
    )
    fake.advance()  # the creates fail; the operation runs on
    fake.advance()


def test_every_zone_the_operation_names_fails_and_is_backed_off(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    for zone in ZONES:  # accepted, then every zone runs out: the failure shows on the operation alone
        gke_api.stockout(zone, mode="operation", shown_on=("operation",))
    clock = SimulatedClock(START)
    actuator = _actuator(gke_api, clock)
    _resized_through_gke(gke_api, 2)
    (operation,) = [op for op in gke_api.operations.values() if op.op_type == "SET_NODE_POOL_SIZE"]
    assert operation.error is not None
    assert [z for z in ZONES if f"zones/{z}'" in operation.error["message"]] == list(ZONES)

    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (3, 3, 3)
    assert [(z.zone, z.failed_units) for z in state.zones] == [(z, 1) for z in ZONES]

    removed = actuator.resize("gpu", 3, "clear-failed")  # what the executor sends to remove failed units
    assert removed.status is ActionStatus.STARTED
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [1, 1, 1]
    (state,) = actuator.list_pools()
    assert [z.backoff_until is not None for z in state.zones] == [True, True, True]

    with pytest.raises(CapacityUnavailable) as refused:  # no zone can take a node: the demand goes elsewhere
        actuator.resize("gpu", 6, "again")
    assert all(z in str(refused.value) for z in ZONES)
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [1, 1, 1]


def test_a_zone_the_error_does_not_name_keeps_its_instances_coming(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    for zone in ZONES[1:]:
        gke_api.stockout(zone, mode="operation", shown_on=("operation",))
    actuator = _actuator(gke_api, SimulatedClock(START))
    _resized_through_gke(gke_api, 2)  # zone a's new node comes up; b and c fall short
    (operation,) = [op for op in gke_api.operations.values() if op.op_type == "SET_NODE_POOL_SIZE"]
    assert operation.error is not None
    assert [z for z in ZONES if f"zones/{z}'" in operation.error["message"]] == list(ZONES[1:])
    gke_api.autoscale("a100", 7)  # zone a's group grows by one more, still being created

    (state,) = actuator.list_pools()

    assert [(z.zone, z.ready_units, z.target_units, z.failed_units) for z in state.zones] == [
        ("us-central1-a", 2, 3, 0),
        ("us-central1-b", 1, 1, 1),
        ("us-central1-c", 1, 1, 1),
    ]
