"""A GKE node pool that lists an instance group Compute no longer has (a 404 on the group) is read without that
zone, instead of not at all: one zone's missing group failed the whole pool's read (the pool unread and held), and
inside a drain's last step or a resize it raised a permanent error that blocked the pool. A read that fails for
good inside a change fails the change with a transient error: a read blocks nothing."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from config.cloud import NodePoolMapping
from models import ActionStatus, PermanentActuatorError, TransientActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
START = datetime(2024, 5, 1, tzinfo=UTC)


def _adapter(fake: FakeGkeApi) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(START), drained=True)


def test_a_zone_whose_group_is_gone_is_left_out_of_the_read(
    gke_api: FakeGkeApi, caplog: pytest.LogCaptureFixture
) -> None:
    gke_api.add_pool("a100", nodes=9, zones=ZONES)
    gke_api.lose_group("a100", "us-central1-c")
    actuator = _adapter(gke_api)

    with caplog.at_level(logging.WARNING, logger="actuators.gke_node_pool"):
        (state,) = actuator.list_pools()

    assert (state.ready_units, state.target_units) == (6, 6)
    assert [z.zone for z in state.zones] == ["us-central1-a", "us-central1-b"]
    assert actuator.unread_pools() == {}
    assert "instance group gke-ml-a100-2-grp of zone us-central1-c was not found (404)" in caplog.text


def test_a_drain_removes_its_node_while_another_zones_group_is_gone(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=9, zones=ZONES)
    gke_api.lose_group("a100", "us-central1-c")
    node = gke_api.pools["a100"].migs[0].instances[0].name

    result = _adapter(gke_api).delete_nodes("gpu", [node], "drain-1")

    assert result.status is ActionStatus.STARTED
    assert gke_api.pools["a100"].migs[0].instances[0].action == "DELETING"


def test_a_scale_up_grows_the_zones_that_have_a_group_one_by_one(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=9, zones=ZONES)
    gke_api.lose_group("a100", "us-central1-c")

    result = _adapter(gke_api).resize("gpu", 8, "up")

    assert result.status is ActionStatus.STARTED
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [4, 4, 0]
    assert gke_api.calls("POST", ":setSize") == 0  # it would size the zone without a group too


def test_a_pool_none_of_whose_groups_is_found_is_unread_and_never_blocked(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=2, zones=ZONES[:2])
    for zone in ZONES[:2]:
        gke_api.lose_group("a100", zone)
    actuator = _adapter(gke_api)

    assert actuator.list_pools() == []
    unread = actuator.unread_pools()["gpu"]
    assert isinstance(unread, PermanentActuatorError)  # a person must look: a critical alert, the pool held
    assert "none of the instance groups of node pool a100 was found" in unread.reason
    with pytest.raises(TransientActuatorError, match="could not be read for the change, nothing sent"):
        actuator.delete_nodes("gpu", ["gke-ml-a100-0-0001"], "drain-1")


@pytest.mark.parametrize("path", ["/nodePools/a100", "/operations", "/instanceGroupManagers/"])
def test_a_read_refused_for_good_inside_a_change_is_transient(gke_api: FakeGkeApi, path: str) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    node = gke_api.pools["a100"].migs[0].instances[0].name
    actuator = _adapter(gke_api)
    refused = "Required 'compute.instanceGroupManagers.get' permission"

    gke_api.fail_next(1, 403, refused, path=path)
    actuator.list_pools()
    assert isinstance(actuator.unread_pools()["gpu"], PermanentActuatorError)
    gke_api.fail_next(1, 403, refused, path=path)
    with pytest.raises(TransientActuatorError, match="nothing sent: HTTP 403"):
        actuator.resize("gpu", 6, "up")
    gke_api.fail_next(1, 403, refused, path=path)
    with pytest.raises(TransientActuatorError, match="nothing sent: HTTP 403"):
        actuator.delete_nodes("gpu", [node], "drain-1")

    assert gke_api.calls("POST", "/deleteInstances") + gke_api.calls("POST", ":setSize") == 0
