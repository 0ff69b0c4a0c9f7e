"""A GKE node pool under ``gke_autoscaling: move-bounds``: a scale-up moves the autoscaler's total bounds to the
target and resizes each zone's instance group to it, since GKE's autoscaler adds nodes only for pods that cannot be
scheduled and never for a raised minimum (the local GKE server's setAutoscaling leaves the pool's size alone, and
nothing here plays its autoscaler). Each group resize is a write asked of the write window like any other."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.write_window import WriteWindow, write_window
from config.cloud import NodePoolMapping
from models import ActionStatus, TransientActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
BOUNDS = {"enabled": True, "totalMinNodeCount": 0, "totalMaxNodeCount": 12}


def _actuator(fake: FakeGkeApi) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling="move-bounds")
    return GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    )


def _group_sizes(fake: FakeGkeApi) -> list[int]:
    return [mig.target_size for mig in fake.pools["a100"].migs]


def test_a_scale_up_resizes_the_zones_groups_to_the_target_as_well_as_the_bounds(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling=BOUNDS)
    actuator = _actuator(gke_api)

    result = actuator.resize("gpu", 7, "up")

    assert result.status is ActionStatus.STARTED
    assert gke_api.pools["a100"].spec["autoscaling"] == {
        "enabled": True,
        "totalMinNodeCount": 7,
        "totalMaxNodeCount": 7,
    }
    assert sorted(_group_sizes(gke_api)) == [2, 2, 3]
    assert "autoscaler bounds 7-7" in result.detail and "target 7 nodes" in result.detail
    assert gke_api.calls("POST", ":setSize") == 0  # refused while the bounds' operation runs on the pool
    (state,) = actuator.list_pools()
    assert (state.target_units, state.ready_units) == (7, 3)

    gke_api.advance()  # lead time passes: the new instances come up; no autoscaler grew anything
    again = actuator.resize("gpu", 7, "up-next-tick")
    assert again.status is ActionStatus.DONE and again.detail == "already at target"
    assert gke_api.calls("POST", ":setAutoscaling") == 1
    (state,) = actuator.list_pools()
    assert (state.target_units, state.ready_units) == (7, 7)


def test_a_scale_up_of_a_zone_out_of_capacity_places_its_share_in_the_others(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling=BOUNDS)
    gke_api.stockout("us-central1-a", mode="http")

    result = _actuator(gke_api).resize("gpu", 6, "up")

    assert result.status is ActionStatus.STARTED
    assert _group_sizes(gke_api) == [1, 3, 2]  # zone a backed off, its share spread over b and c


def test_a_scale_down_under_move_bounds_still_moves_only_the_bounds(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=6, zones=ZONES, autoscaling=BOUNDS)
    result = _actuator(gke_api).resize("gpu", 4, "down")
    assert result.status is ActionStatus.STARTED
    assert gke_api.pools["a100"].spec["autoscaling"]["totalMaxNodeCount"] == 4
    assert _group_sizes(gke_api) == [2, 2, 2]
    assert gke_api.calls("POST", "/deleteInstances") == 0


@pytest.fixture
def leadership_running_out() -> Iterator[None]:
    """The bounds are sent with 10 s of leadership left; by the first group resize 0.5 s are left."""
    left = iter([10.0, 0.5, 0.5, 0.5])
    with write_window(WriteWindow(timedelta(seconds=1), lambda: next(left))):
        yield


@pytest.mark.usefixtures("leadership_running_out")
def test_a_group_resize_the_leadership_left_cannot_cover_is_not_sent(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling=BOUNDS)
    with pytest.raises(TransientActuatorError, match="less than the 1s a write may take"):
        _actuator(gke_api).resize("gpu", 7, "up")
    assert gke_api.calls("POST", ":setAutoscaling") == 1
    assert gke_api.calls("POST", "/resize") == 0
    assert _group_sizes(gke_api) == [1, 1, 1]
