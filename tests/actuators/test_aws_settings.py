"""The aws section of the configuration: mappings checked against the pools, one problem per key path; pools mapped
there need no mapping in the Google cloud section, and keys have no place in it."""

from __future__ import annotations

from typing import Any

import pytest

from config import settings_from_mapping
from models import ConfigError
from tests.actuators.test_cloud_settings import BASE, CLOUD

SPOT: dict[str, Any] = {
    "id": "p5-spot", "kind": "gpu-node-pool", "tier": "spot", "chips_per_unit": 8, "max_units": 4,
    "price_per_unit_hour_usd": 30, "spot_interruption_per_hour": 0.02, "lead_time": "10m", "serves": ["train"],
}  # fmt: skip
ON_DEMAND: dict[str, Any] = {**SPOT, "id": "p5-on-demand", "tier": "on-demand", "spot_interruption_per_hour": 0}
AWS: dict[str, Any] = {
    "region": "us-east-1",
    "cluster": "ml",
    "auto_scaling_groups": [{"pool": "p5-spot", "group": "gpu-p5-spot"}],
    "nodegroups": [{"pool": "p5-on-demand", "nodegroup": "p5-on-demand"}],
}


def _document(aws: dict[str, Any]) -> dict[str, Any]:
    return {**BASE, "pools": [*BASE["pools"], SPOT, ON_DEMAND], "cloud": CLOUD, "aws": aws}


def _problems(aws: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        settings_from_mapping(_document(aws))
    return [str(p) for p in error.value.problems]


def test_aws_pools_beside_google_ones_load() -> None:
    settings = settings_from_mapping(_document(AWS))
    assert settings.aws is not None
    assert settings.aws.pools == {"p5-spot", "p5-on-demand"}
    assert settings.aws.auto_scaling_groups[0].node_label == "leadtime.io/auto-scaling-group"


def test_a_pool_mapped_nowhere_is_still_reported() -> None:
    problems = _problems({**AWS, "nodegroups": []})
    assert problems == ["pools[3]: pool 'p5-on-demand' (gpu-node-pool) has no mapping in the cloud section"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"nodegroups": [{"pool": "ghost", "nodegroup": "p5"}]}, "aws.nodegroups[0].pool: unknown pool 'ghost'"),
        (
            {"auto_scaling_groups": [{"pool": "v5e", "group": "g"}]},
            "aws.auto_scaling_groups[0].pool: pool 'v5e' is of kind tpu-slice-group",
        ),
        ({"cluster": None}, "aws.cluster: EKS managed node groups need the name of their EKS cluster"),
        (
            {"auto_scaling_groups": [{"pool": "p5-spot", "group": "p5-on-demand"}]},
            "aws: name 'p5-on-demand' is used by 2 mappings",
        ),
    ],
)
def test_inconsistent_mappings_are_reported_by_key(change: dict[str, Any], expected: str) -> None:
    assert any(p.startswith(expected) for p in _problems({**AWS, **change})), _problems({**AWS, **change})


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"region": "Virginia"}, "aws.region"),
        ({"aws_access_key_id": "AKIAEXAMPLE"}, "aws.aws_access_key_id"),  # credentials come from the chain only
    ],
)
def test_bad_or_unknown_keys_are_rejected(change: dict[str, Any], key: str) -> None:
    assert any(p.startswith(key) for p in _problems({**AWS, **change}))
