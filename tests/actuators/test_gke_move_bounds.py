"""A GKE node pool under ``gke_autoscaling: move-bounds``: a scale-up resizes each zone's instance group to the
target and then moves the autoscaler's total bounds to what the groups were given, since GKE's autoscaler adds nodes
only for pods that cannot be scheduled and never for a raised minimum (the local GKE server's setAutoscaling leaves the
pool's size alone, and nothing here plays its autoscaler). A scale-up refused for want of room leaves the bounds where
the pool is, and one placed in part moves them to what was placed: raised above the pool, they would let GKE's
autoscaler buy the refused nodes later, while the demand went to the next pool. Each group resize is a write asked of
the write window like any other."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.write_window import WriteWindow, write_window
from config.cloud import NodePoolMapping
from models import ActionStatus, CapacityUnavailable, TransientActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi, Mig

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
BOUNDS = {"enabled": True, "totalMinNodeCount": 0, "totalMaxNodeCount": 12}
AT_THREE = {"enabled": True, "totalMinNodeCount": 3, "totalMaxNodeCount": 3}


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
    assert "target 7 nodes" in result.detail and "autoscaler bounds 0-12 -> 7-7" in result.detail
    assert gke_api.calls("POST", ":setSize") == 0
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
    assert gke_api.pools["a100"].spec["autoscaling"]["totalMaxNodeCount"] == 6


def test_a_scale_up_no_zone_has_room_for_leaves_the_bounds_where_the_pool_is(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling=AT_THREE)
    for zone in ZONES:
        gke_api.stockout(zone, mode="http")

    with pytest.raises(CapacityUnavailable, match="ZONE_RESOURCE_POOL_EXHAUSTED"):
        _actuator(gke_api).resize("gpu", 9, "up")

    assert _group_sizes(gke_api) == [1, 1, 1]
    assert gke_api.pools["a100"].spec["autoscaling"] == AT_THREE  # 9-9 before
    assert gke_api.calls("POST", ":setAutoscaling") == 0


def test_a_scale_up_after_one_zones_creates_failed_places_its_share_in_the_others(gke_api: FakeGkeApi) -> None:
    """Zone a's create fails after the resize was accepted (the stockout told on its instance): the next scale-up
    removes the failed instance, backs zone a off and places its share in b and c, as without GKE autoscaling, the
    bounds moved to the 6 nodes placed. It was refused whole before (CapacityUnavailable, the pool backed off and
    the demand sent to the next pool), groups 1, 2, 2 and bounds 5-5."""
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling=AT_THREE)
    gke_api.stockout("us-central1-a", mode="operation")
    actuator = _actuator(gke_api)
    assert actuator.resize("gpu", 6, "up-1").status is ActionStatus.STARTED
    gke_api.advance()  # zone a's create fails; b's and c's instances come up
    (state,) = actuator.list_pools()
    assert (state.target_units, state.failed_units) == (5, 1)

    result = actuator.resize("gpu", 6, "up-2")

    assert result.status is ActionStatus.STARTED
    assert _group_sizes(gke_api) == [1, 3, 2]
    assert "target 6 nodes (us-central1-a 1, us-central1-b 3, us-central1-c 2)" in result.detail
    assert gke_api.pools["a100"].spec["autoscaling"] == {
        "enabled": True,
        "totalMinNodeCount": 6,
        "totalMaxNodeCount": 6,
    }
    assert gke_api.calls("POST", ":setAutoscaling") == 1  # up-1's: the bounds already say the 6 placed
    (state,) = actuator.list_pools()
    assert [z.backoff_until is not None for z in state.zones] == [True, False, False]


def test_a_scale_up_with_every_zone_backed_off_leaves_the_bounds_where_the_pool_is(gke_api: FakeGkeApi) -> None:
    """The zones were backed off once their creates failed (the stockout told on the instances): the next scale-up
    finds no open zone and is refused, the bounds left at the pool's size (6-6, the refused target, before)."""
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling=AT_THREE)
    for zone in ZONES:
        gke_api.stockout(zone, mode="operation")
    actuator = _actuator(gke_api)
    assert actuator.resize("gpu", 6, "up-1").status is ActionStatus.STARTED
    assert gke_api.pools["a100"].spec["autoscaling"]["totalMaxNodeCount"] == 6
    gke_api.advance()  # the creates fail in every zone
    (state,) = actuator.list_pools()
    assert (state.target_units, state.failed_units) == (3, 3)
    with pytest.raises(CapacityUnavailable, match="3 instances could not be created"):
        actuator.resize("gpu", 6, "up-2")  # the failed instances are removed, every zone backed off
    assert gke_api.pools["a100"].spec["autoscaling"] == AT_THREE
    gke_api.finish_operations()
    with pytest.raises(CapacityUnavailable, match="zones out of capacity"):
        actuator.resize("gpu", 6, "up-3")
    assert gke_api.pools["a100"].spec["autoscaling"] == AT_THREE
    assert _group_sizes(gke_api) == [1, 1, 1]


def test_a_scale_up_placed_in_part_moves_the_bounds_to_what_was_placed(
    gke_api: FakeGkeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Zone c refuses from the start; a and b take their first share and then run out (each accepts one resize): 7
    of the 9 nodes are placed, and the bounds say 7 (9-9, the target, before)."""
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling=AT_THREE)
    gke_api.stockout("us-central1-c", mode="http")
    resize_group = gke_api._resize_mig

    def then_out(mig: Mig, want: int) -> None:
        resize_group(mig, want)
        gke_api.stockout(mig.zone, mode="http")  # room for this resize, not for another

    monkeypatch.setattr(gke_api, "_resize_mig", then_out)

    result = _actuator(gke_api).resize("gpu", 9, "up")

    assert result.status is ActionStatus.STARTED
    assert _group_sizes(gke_api) == [3, 3, 1]
    assert "target 7 nodes" in result.detail and "2 more found no zone with room" in result.detail
    assert gke_api.pools["a100"].spec["autoscaling"] == {
        "enabled": True,
        "totalMinNodeCount": 7,
        "totalMaxNodeCount": 7,
    }


def test_a_scale_down_under_move_bounds_still_moves_only_the_bounds(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=6, zones=ZONES, autoscaling=BOUNDS)
    result = _actuator(gke_api).resize("gpu", 4, "down")
    assert result.status is ActionStatus.STARTED
    assert gke_api.pools["a100"].spec["autoscaling"]["totalMaxNodeCount"] == 4
    assert _group_sizes(gke_api) == [2, 2, 2]
    assert gke_api.calls("POST", "/deleteInstances") == 0


@pytest.fixture
def leadership_running_out() -> Iterator[None]:
    """The first group resize is sent with 10 s of leadership left; by the second 0.5 s are left; then it is
    renewed."""
    left = itertools.chain([10.0, 0.5], itertools.repeat(10.0))
    with write_window(WriteWindow(timedelta(seconds=1), lambda: next(left))):
        yield


@pytest.mark.usefixtures("leadership_running_out")
def test_a_group_resize_the_leadership_left_cannot_cover_is_not_sent(gke_api: FakeGkeApi) -> None:
    """Nor are the bounds moved: they follow the groups, on the retry that resizes the rest."""
    gke_api.add_pool("a100", nodes=3, zones=ZONES, autoscaling=BOUNDS)
    actuator = _actuator(gke_api)
    with pytest.raises(TransientActuatorError, match="less than the 1s a write may take"):
        actuator.resize("gpu", 7, "up")
    assert gke_api.calls("POST", "/resize") == 1
    assert _group_sizes(gke_api) == [3, 1, 1]
    assert gke_api.calls("POST", ":setAutoscaling") == 0
    assert gke_api.pools["a100"].spec["autoscaling"] == BOUNDS

    retried = actuator.resize("gpu", 7, "up")  # the same key, with the leadership renewed
    assert retried.status is ActionStatus.STARTED
    assert _group_sizes(gke_api) == [3, 2, 2]
    assert gke_api.pools["a100"].spec["autoscaling"]["totalMaxNodeCount"] == 7
