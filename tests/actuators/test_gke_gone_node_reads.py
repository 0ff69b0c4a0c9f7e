"""The look for a drained node in the other node pools' groups lists only the groups whose instances it could be:
a group's instances are named ``<baseInstanceName>-<suffix>``, so each other group is read (get) and its instances
listed only when its base name starts the node's name, instead of listing every group of the cluster."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from config.cloud import NodePoolMapping
from models import ActionStatus, PermanentActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

START = datetime(2024, 5, 1, tzinfo=UTC)
OTHERS = 6


def _adapter(fake: FakeGkeApi) -> GkeNodePoolActuator:
    clients = google_clients(fake.url)
    mappings = [NodePoolMapping(pool="a", node_pool="a100")]
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, mappings, SimulatedClock(START), drained=True)


def _names(fake: FakeGkeApi, pool: str) -> list[str]:
    return [i.name for m in fake.pools[pool].migs for i in m.instances]


@pytest.fixture
def cluster(gke_api: FakeGkeApi) -> FakeGkeApi:
    """Node pool a100 (one zone, 3 nodes) and six other node pools of 2 nodes each."""
    gke_api.add_pool("a100", nodes=3)
    for i in range(OTHERS):
        gke_api.add_pool(f"other{i}", nodes=2)
    return gke_api


def test_a_gone_node_lists_no_other_node_pools_instances(cluster: FakeGkeApi) -> None:
    first = _names(cluster, "a100")[0]
    _adapter(cluster).delete_nodes("a", [first], "drain-1")  # lands
    cluster.advance()  # the VM is deleted
    lists = cluster.calls("POST", "/listManagedInstances")

    result = _adapter(cluster).delete_nodes("a", [first], "drain-1")  # taken over by another replica

    assert (result.status, result.detail) == (
        ActionStatus.DONE,
        f"{first} gone from its instance group (deleted already)",
    )
    assert cluster.calls("POST", "/listManagedInstances") - lists == len(cluster.pools["a100"].migs)  # its own only


def test_a_node_of_another_node_pool_lists_that_pools_group_alone(cluster: FakeGkeApi) -> None:
    other = _names(cluster, "other3")[1]
    lists = cluster.calls("POST", "/listManagedInstances")

    with pytest.raises(PermanentActuatorError, match=f"nodes {other} \\(node pool other3\\) are instances of another"):
        _adapter(cluster).delete_nodes("a", [other], "wrong")

    assert cluster.calls("POST", "/listManagedInstances") - lists == len(cluster.pools["a100"].migs) + 1
    assert cluster.calls("POST", "/deleteInstances") == 0
