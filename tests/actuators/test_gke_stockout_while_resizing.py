"""A zone's stockout told on the instances is acted on at the next resize, not after a GKE operation gives up.

GKE's setSize starts an operation that waits for its groups' creates: in a stockout it runs until GKE gives up ("Not
all instances running in IGM after 35m0s", tests/fakes/REFERENCE.md), and GKE refuses every other change to the pool
meanwhile. The adapter sent one setSize whenever every zone got the same size, and held every resize of a pool while
an operation ran on it: the failed instances were reported (the instances' last attempt says so at once) but neither
removed nor their zone backed off, and their share was not placed in the zones with room, until GKE's operation
ended. The adapter now resizes each zone's group through Compute (as cluster-autoscaler does), which starts no GKE
operation. The real google-cloud-container and google-cloud-compute clients against ``tests.fakes.gke_api``, whose
setSize now runs on through the step its creates fail in.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from config.cloud import NodePoolMapping
from models import ActionStatus, TransientActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")


def _actuator(fake: FakeGkeApi) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    return GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC)), drained=True
    )


def _group_sizes(fake: FakeGkeApi) -> list[int]:
    return [mig.target_size for mig in fake.pools["a100"].migs]


def test_a_stockout_of_one_zone_is_removed_and_its_share_placed_elsewhere_on_the_next_resizes(
    gke_api: FakeGkeApi,
) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    gke_api.stockout("us-central1-a", mode="operation")
    actuator = _actuator(gke_api)
    assert actuator.resize("gpu", 6, "up").status is ActionStatus.STARTED  # 2 in each zone
    assert gke_api.calls("POST", ":setSize") == 0
    assert gke_api.calls("POST", "/resize") == 3
    gke_api.advance()  # b's and c's new nodes come up; a's create fails, told on its last attempt

    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (5, 5, 1)
    assert state.in_flight_operation is None  # before: the setSize's operation, running on for 35 minutes

    removed = actuator.resize("gpu", state.target_units, "clear-failed")  # what the executor sends
    assert removed.detail == "removed 1 instances that could not be created"
    again = actuator.resize("gpu", 6, "up-again")  # before: both refused, "operation ... is still running"
    assert again.status is ActionStatus.STARTED
    assert _group_sizes(gke_api) == [1, 3, 2]  # zone a backed off, its share in b
    (state,) = actuator.list_pools()
    assert [z.backoff_until is not None for z in state.zones] == [True, False, False]


def test_a_set_size_sent_through_gke_runs_on_after_its_creates_fail_and_holds_the_pool(gke_api: FakeGkeApi) -> None:
    """Someone resizes the pool through GKE (``gcloud container clusters resize``): its operation outlives the
    failed creates, and GKE refuses other changes to the pool until it ends, so the agent holds its resizes (a
    transient refusal, no alert) and acts once it has ended."""
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    gke_api.stockout("us-central1-a", mode="operation")
    actuator = _actuator(gke_api)
    google_clients(gke_api.url).gke.set_node_pool_size(request={"name": f"{CLUSTER}/nodePools/a100", "node_count": 2})
    gke_api.advance()  # the creates fail in zone a; GKE's operation runs on
    (state,) = actuator.list_pools()
    assert state.failed_units == 1
    assert (state.in_flight_operation or "").endswith("set_node_pool_size")
    with pytest.raises(TransientActuatorError, match="still running"):
        actuator.resize("gpu", 6, "held")

    gke_api.advance()  # GKE gives up: the operation ends with the stockout
    (operation,) = gke_api.operations.values()
    assert operation.status == "DONE" and operation.error is not None
    assert "Not all instances running in IGM" in operation.error["message"]
    (state,) = actuator.list_pools()
    assert (state.in_flight_operation, state.failed_units) == (None, 1)
    assert actuator.resize("gpu", 6, "up").status is ActionStatus.STARTED
    assert _group_sizes(gke_api) == [1, 3, 2]
