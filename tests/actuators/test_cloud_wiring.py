"""The real actuators built from a cloud section, driven through the router against the fake GKE API."""

from __future__ import annotations

from datetime import UTC, datetime

from actuators.cloud_wiring import build_cloud_actuators
from config.cloud import CloudSettings
from models.clock import SimulatedClock
from tests.fakes.gke_api import FakeGkeApi


def test_the_router_reaches_node_pools_and_slices(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100-pool", nodes=1)
    cloud = CloudSettings.model_validate(
        {
            "project": "test-project",
            "location": "us-central1",
            "cluster": "ml",
            "endpoint": gke_api.url,
            "node_pools": [{"pool": "a100", "node_pool": "a100-pool"}],
            "tpu_slice_groups": [
                {"pool": "v5e", "group": "v5e", "machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x4"}
            ],
        }
    )
    built = build_cloud_actuators(cloud, SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC)))
    built.router.resize("a100", 2, "k1")
    built.router.resize("v5e", 1, "k2")
    states = {s.pool_id: (s.ready_units, s.target_units) for s in built.router.list_pools()}
    assert states == {"a100": (1, 2), "v5e": (0, 1)}
    assert gke_api.pools["v5e-0"].spec["initialNodeCount"] == 2
