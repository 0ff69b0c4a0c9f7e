"""GKE's autoscaling bounds bind GKE's autoscaler only, never the agent's resize: a node pool whose autoscaling was
turned off (as the refusal of a pool with autoscaling on asks) may still carry its last ``maxNodeCount`` or
``totalMaxNodeCount``, and the adapter capped scale-ups there and, once every zone sat at the old bound, refused
with CapacityUnavailable: a false stockout alert, the pool backed off and its demand sent to the next pool."""

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


def _adapter(fake: FakeGkeApi, mode: str = "refuse") -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling=mode)  # type: ignore[arg-type]
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(START))


def _per_zone(fake: FakeGkeApi) -> list[int]:
    return [m.target_size for m in fake.pools["a100"].migs]


@pytest.mark.parametrize(
    "bounds",
    [{"minNodeCount": 1, "maxNodeCount": 2}, {"totalMinNodeCount": 1, "totalMaxNodeCount": 6}],
    ids=["per-zone", "total"],
)
def test_the_bounds_of_a_pool_whose_autoscaling_is_off_do_not_cap_a_scale_up(
    gke_api: FakeGkeApi, bounds: dict[str, int]
) -> None:
    gke_api.add_pool("a100", nodes=6, zones=ZONES, autoscaling={"enabled": False, **bounds})
    actuator = _adapter(gke_api)

    result = actuator.resize("gpu", 9, "up")

    assert result.status is ActionStatus.STARTED
    assert "more found no zone with room" not in result.detail
    assert _per_zone(gke_api) == [3, 3, 3]
    gke_api.advance()
    assert actuator.resize("gpu", 12, "up-again").status is ActionStatus.STARTED
    assert _per_zone(gke_api) == [4, 4, 4]


def test_a_pool_out_of_capacity_is_refused_for_its_capacity_alone(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=6, zones=ZONES, autoscaling={"enabled": False, "maxNodeCount": 2})
    for zone in ZONES:
        gke_api.stockout(zone, mode="http")

    with pytest.raises(CapacityUnavailable) as refused:
        _adapter(gke_api).resize("gpu", 9, "up")

    assert "zones out of capacity: us-central1-a until 00:30Z, us-central1-b until 00:30Z" in refused.value.reason
    assert "maxNodeCount" not in refused.value.reason


def test_under_move_bounds_the_pools_own_per_zone_bounds_do_not_cap_the_scale_up(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=6, zones=ZONES, autoscaling={"enabled": True, "minNodeCount": 0, "maxNodeCount": 2})

    result = _adapter(gke_api, "move-bounds").resize("gpu", 9, "up")

    assert result.status is ActionStatus.STARTED
    assert gke_api.pools["a100"].spec["autoscaling"] == {
        "enabled": True,
        "totalMinNodeCount": 9,
        "totalMaxNodeCount": 9,
    }
    assert _per_zone(gke_api) == [3, 3, 3]
