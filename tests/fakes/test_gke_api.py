"""The fake GKE and Compute Engine APIs hold to the facts in ``tests/fakes/REFERENCE.md``, checked through the real
clients: sizes are per zone, autoscaling bounds are per zone or total but not both, a MIG resize changes one zone,
errors come back in Google's shapes and translate to the right decision."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as google_exceptions
from google.cloud import container_v1

from actuators.vendor_errors import from_google
from models import CapacityUnavailable
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
POOL = "projects/test-project/locations/us-central1/clusters/ml/nodePools/a100"


def test_set_size_sets_every_zone_to_node_count(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    gke = google_clients(gke_api.url).gke
    gke.set_node_pool_size(request={"name": POOL, "node_count": 2})
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [2, 2, 2]  # 6 nodes, not 2


def test_a_created_pool_gets_its_initial_node_count_in_each_zone(gke_api: FakeGkeApi) -> None:
    gke = google_clients(gke_api.url).gke
    parent = POOL.rsplit("/nodePools/", 1)[0]
    node_pool = container_v1.NodePool(name="v5e-0", initial_node_count=4, locations=list(ZONES[:2]))
    gke.create_node_pool(request={"parent": parent, "node_pool": node_pool})
    assert [m.target_size for m in gke_api.pools["v5e-0"].migs] == [4, 4]


def test_autoscaling_bounds_are_per_zone_or_total_never_both(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    gke = google_clients(gke_api.url).gke
    mixed = {"enabled": True, "min_node_count": 1, "total_max_node_count": 9}
    with pytest.raises(google_exceptions.BadRequest, match="cannot be used with"):
        gke.set_node_pool_autoscaling(request={"name": POOL, "autoscaling": mixed})
    total = {"enabled": True, "total_min_node_count": 3, "total_max_node_count": 9}
    gke.set_node_pool_autoscaling(request={"name": POOL, "autoscaling": total})
    assert gke_api.pools["a100"].spec["autoscaling"]["totalMaxNodeCount"] == 9


def test_a_mig_resize_changes_its_zone_only_and_is_done_once_scheduled(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    migs = google_clients(gke_api.url).migs
    b = gke_api.pools["a100"].migs[1]
    op = migs.resize_unary(project="test-project", zone=b.zone, instance_group_manager=b.name, size=3)
    assert op.status == op.Status.DONE
    assert [m.target_size for m in gke_api.pools["a100"].migs] == [1, 3, 1]
    managed = list(migs.list_managed_instances(project="test-project", zone=b.zone, instance_group_manager=b.name))
    assert [m.current_action for m in managed] == ["NONE", "CREATING", "CREATING"]


def test_a_refused_mig_resize_has_computes_error_shape_and_reads_as_a_stockout(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=3, zones=ZONES)
    gke_api.stockout(ZONES[0], mode="http")
    migs = google_clients(gke_api.url).migs
    a = gke_api.pools["a100"].migs[0]
    with pytest.raises(google_exceptions.GoogleAPICallError) as refused:
        migs.resize_unary(project="test-project", zone=a.zone, instance_group_manager=a.name, size=2)
    assert [e["reason"] for e in refused.value.errors] == ["insufficientCapacity"]
    assert isinstance(from_google("gpu", refused.value), CapacityUnavailable)
    assert a.target_size == 1
