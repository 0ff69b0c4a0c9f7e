"""The cloud section of the configuration: mappings checked against the pools, one problem per key path."""

from __future__ import annotations

from typing import Any

import pytest

from config import settings_from_mapping
from models import ConfigError

BASE: dict[str, Any] = {
    "demand_classes": [{"name": "train", "family": "gpu"}, {"name": "tpu", "family": "tpu"}],
    "pools": [
        {"id": "a100", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4,
         "price_per_unit_hour_usd": 30, "lead_time": "10m", "serves": ["train"]},
        {"id": "v5e", "kind": "tpu-slice-group", "family": "tpu", "chips_per_unit": 16, "max_units": 4,
         "price_per_chip_hour_usd": 1.2, "lead_time": "30m", "serves": ["tpu"]},
    ],
}  # fmt: skip
CLOUD: dict[str, Any] = {
    "project": "p",
    "location": "us-central1",
    "cluster": "ml",
    "node_pools": [{"pool": "a100", "node_pool": "a100-pool"}],
    "tpu_slice_groups": [
        {
            "pool": "v5e",
            "group": "v5e",
            "machine_type": "ct5lp-hightpu-4t",
            "tpu_topology": "4x4",
            "zone": "us-central1-a",
        }
    ],
}


def _problems(cloud: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        settings_from_mapping({**BASE, "cloud": cloud})
    return [str(p) for p in error.value.problems]


def test_a_consistent_cloud_section_loads() -> None:
    settings = settings_from_mapping({**BASE, "cloud": CLOUD})
    assert settings.cloud is not None
    assert settings.cloud.tpu_slice_groups[0].hosts_per_slice == 4
    assert settings.cloud.node_pools[0].gke_autoscaling == "refuse"
    assert settings.cloud.cluster_path == "projects/p/locations/us-central1/clusters/ml"


def test_unknown_pools_wrong_kinds_and_topologies_are_reported_with_key_paths() -> None:
    cloud = {
        **CLOUD,
        "node_pools": [{"pool": "v5e", "node_pool": "x"}, {"pool": "h100", "node_pool": "y"}],
        "tpu_slice_groups": [
            {"pool": "v5e", "group": "v5e", "machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x4"}
        ],
    }
    problems = _problems(cloud)
    assert any(p.startswith("cloud.node_pools[0].pool: pool 'v5e' is of kind tpu-slice-group") for p in problems)
    assert any(p.startswith("cloud.node_pools[1].pool: unknown pool 'h100'") for p in problems)
    assert any(p.startswith("cloud.tpu_slice_groups[0].tpu_topology: topology 2x4 has 8 chips") for p in problems)
    assert any(p.startswith("pools[0]: pool 'a100' (gpu-node-pool) has no mapping") for p in problems)
    assert any("mapped 2 times" in p for p in problems)


def test_unknown_keys_and_bad_modes_are_rejected() -> None:
    problems = _problems({**CLOUD, "node_pools": [{"pool": "a100", "node_pool": "a", "gke_autoscaling": "fight"}]})
    assert problems == ["cloud.node_pools[0].gke_autoscaling: Input should be 'refuse' or 'move-bounds' (got 'fight')"]
    assert _problems({**CLOUD, "zone": "x"}) == [
        "cloud.zone: unknown key (check its spelling and the section it is in)"
    ]


def test_zone_backoff_is_a_duration_with_a_default() -> None:
    settings = settings_from_mapping({**BASE, "cloud": CLOUD})
    assert settings.cloud is not None and settings.cloud.zone_backoff.total_seconds() == 30 * 60
    settings = settings_from_mapping({**BASE, "cloud": {**CLOUD, "zone_backoff": "10m"}})
    assert settings.cloud is not None and settings.cloud.zone_backoff.total_seconds() == 10 * 60
    (problem,) = _problems({**CLOUD, "zone_backoff": "soon"})
    assert problem.startswith("cloud.zone_backoff: ")


def test_slices_in_a_regional_cluster_must_name_their_zone() -> None:
    """GKE creates a node pool without ``locations`` in every zone of a regional cluster: a slice would get its
    hosts three times over. A zonal cluster's node pools default to its zone."""
    unzoned = [{**CLOUD["tpu_slice_groups"][0], "zone": None}]
    (problem,) = _problems({**CLOUD, "tpu_slice_groups": unzoned})
    assert problem.startswith("cloud.tpu_slice_groups[0].zone: required: cloud.location 'us-central1' is a region")
    zonal = settings_from_mapping(
        {**BASE, "cloud": {**CLOUD, "location": "us-central1-a", "tpu_slice_groups": unzoned}}
    )
    assert zonal.cloud is not None and zonal.cloud.tpu_slice_groups[0].zone is None
