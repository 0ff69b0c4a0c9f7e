"""Cloud mappings that would buy or touch the wrong thing are refused when the configuration is loaded, each problem
naming its key: a node pool that a slice group would take for one of its slices, Spot capacity bought for a pool
priced as another tier (or the reverse), and a TPU accelerator or machine type that buys another number of chips
than the pool counts."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest

from actuators.unit_groups import UnitPhase, members
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
    "cloud": {
        "project": "p",
        "location": "us-central1",
        "cluster": "ml",
        "node_pools": [{"pool": "a100", "node_pool": "a100-pool"}],
        "tpu_slice_groups": [
            {"pool": "v5e", "group": "v5e", "machine_type": "ct5lp-hightpu-4t", "tpu_topology": "4x4",
             "zone": "us-central1-a"},
        ],
    },
}  # fmt: skip


def _with(change: dict[str, Any], section: str = "node_pools", index: int = 0) -> dict[str, Any]:
    config = copy.deepcopy(BASE)
    config["cloud"][section][index].update(change)
    return config


def _problems(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        settings_from_mapping(config)
    return [str(p) for p in error.value.problems]


def test_the_base_configuration_loads() -> None:
    settings = settings_from_mapping(BASE)
    assert settings.cloud is not None and settings.cloud.node_pools[0].node_pool == "a100-pool"


@pytest.mark.parametrize("node_pool", ["v5e-0", "v5e-1", "v5e-17", "v5e-007", "v5e-a", "v5e0", "v5e-1-gpu", "xv5e-0"])
def test_a_node_pool_is_refused_exactly_when_the_slice_group_would_claim_it(node_pool: str) -> None:
    """The slice actuator lists every GKE node pool and takes as its slices those ``members`` picks out; the check
    refuses the same names, no more (a GPU node pool named ``v5e-a`` or ``v5e-1-gpu`` is no slice of ``v5e``)."""
    claimed = bool(members("v5e", [(node_pool, UnitPhase.READY, "")]))
    config = _with({"node_pool": node_pool})
    if not claimed:
        settings = settings_from_mapping(config)
        assert settings.cloud is not None and settings.cloud.node_pools[0].node_pool == node_pool
        return
    (problem,) = _problems(config)
    assert problem.startswith(
        f"cloud.node_pools[0].node_pool: GKE node pool {node_pool!r} is named like a slice of TPU slice group 'v5e' "
        "(cloud.tpu_slice_groups[0].group)"
    )


def test_every_slice_group_is_checked_and_each_clash_is_reported() -> None:
    config = copy.deepcopy(BASE)
    config["pools"].append({**config["pools"][1], "id": "v6e"})
    config["cloud"]["tpu_slice_groups"].append(
        {**config["cloud"]["tpu_slice_groups"][0], "pool": "v6e", "group": "trillium"}
    )
    config["pools"].append({**config["pools"][0], "id": "h100"})
    config["cloud"]["node_pools"] = [
        {"pool": "a100", "node_pool": "a100-pool"},
        {"pool": "h100", "node_pool": "trillium-3"},
    ]
    (problem,) = _problems(config)
    assert problem.startswith(
        "cloud.node_pools[1].node_pool: GKE node pool 'trillium-3' is named like a slice of TPU slice group "
        "'trillium' (cloud.tpu_slice_groups[1].group)"
    )


def _queued(tier: str | None, spot: bool) -> dict[str, Any]:
    """The TPU pool as queued resources of ``tier``, asked for as Spot or not."""
    config = copy.deepcopy(BASE)
    config["pools"][1].update(kind="tpu-queued-resource", tier=tier)
    del config["cloud"]["tpu_slice_groups"]
    config["cloud"]["queued_resources"] = [
        {"pool": "v5e", "group": "qr", "zone": "us-central1-a", "accelerator_type": "v5litepod-16",
         "runtime_version": "v2-alpha-tpuv5-lite", "chips": 16, "spot": spot},
    ]  # fmt: skip
    return config


def _slices(tier: str | None, spot: bool) -> dict[str, Any]:
    config = _with({"spot": spot}, "tpu_slice_groups")
    config["pools"][1]["tier"] = tier
    return config


_BUILDS = [("tpu_slice_groups", _slices), ("queued_resources", _queued)]


@pytest.mark.parametrize(("section", "build"), _BUILDS, ids=[section for section, _ in _BUILDS])
@pytest.mark.parametrize(
    ("tier", "spot", "given"),
    [
        ("spot", False, "pools[1].tier"),
        ("on-demand", True, "pools[1].tier"),
        ("reserved", True, "pools[1].tier"),
        (None, True, "pools[1].tier unset, so on-demand"),
    ],
)
def test_spot_capacity_for_a_pool_of_another_tier_is_refused_naming_both_keys(
    section: str, build: Callable[[str | None, bool], dict[str, Any]], tier: str | None, spot: bool, given: str
) -> None:
    (problem,) = _problems(build(tier, spot))
    bought = "true buys Spot capacity" if spot else "false buys standard (not Spot) capacity"
    assert problem.startswith(
        f"cloud.{section}[0].spot: {bought} but pool 'v5e' is tier {tier or 'on-demand'} ({given})"
    )


@pytest.mark.parametrize(("section", "build"), _BUILDS, ids=[section for section, _ in _BUILDS])
@pytest.mark.parametrize(("tier", "spot"), [("spot", True), ("on-demand", False), ("reserved", False), (None, False)])
def test_a_mapping_that_buys_the_pool_s_own_tier_loads(
    section: str, build: Callable[[str | None, bool], dict[str, Any]], tier: str | None, spot: bool
) -> None:
    settings = settings_from_mapping(build(tier, spot))
    assert settings.cloud is not None
    (mapping,) = getattr(settings.cloud, section)
    assert mapping.spot is spot
    assert (settings.pools[1].capacity_tier.value == "spot") is spot


def _queued_type(accelerator_type: str, chips: int) -> dict[str, Any]:
    config = _queued(None, False)
    config["pools"][1]["chips_per_unit"] = chips
    config["cloud"]["queued_resources"][0].update(accelerator_type=accelerator_type, chips=chips)
    return config


@pytest.mark.parametrize(
    ("accelerator_type", "chips"),
    [("v2-32", 16), ("v3-8", 4), ("v4-8", 4), ("v5p-128", 64), ("v5litepod-16", 16), ("v6e-8", 8), ("v9z-16", 16)],
)
def test_a_queued_resource_of_the_chips_its_type_names_loads(accelerator_type: str, chips: int) -> None:
    """v2, v3, v4 and v5p types count TensorCores, 2 a chip; v5litepod and v6e types count chips; a family the
    check does not know (v9z) is taken at its word."""
    settings = settings_from_mapping(_queued_type(accelerator_type, chips))
    assert settings.cloud is not None and settings.cloud.queued_resources[0].chips == chips


@pytest.mark.parametrize(
    ("accelerator_type", "chips", "bought"),
    [("v5p-128", 128, 64), ("v4-32", 32, 16), ("v3-8", 8, 4), ("v2-8", 8, 4), ("v5litepod-16", 32, 16),
     ("v6e-16", 8, 16)],
)  # fmt: skip
def test_a_queued_resource_whose_type_buys_other_chips_is_refused(
    accelerator_type: str, chips: int, bought: int
) -> None:
    (problem,) = _problems(_queued_type(accelerator_type, chips))
    assert problem.startswith(
        f"cloud.queued_resources[0].accelerator_type: {accelerator_type} is {bought} chips but "
        f"cloud.queued_resources[0].chips is {chips}"
    )


def test_an_odd_number_of_tensorcores_is_not_an_accelerator_type() -> None:
    (problem,) = _problems(_queued_type("v4-7", 4))
    assert problem.startswith("cloud.queued_resources[0].accelerator_type: not a TPU accelerator type: 7 TensorCores")


def _slice_type(machine_type: str, topology: str, chips_per_host: int | None = None) -> dict[str, Any]:
    change: dict[str, Any] = {"machine_type": machine_type, "tpu_topology": topology}
    if chips_per_host is not None:
        change["chips_per_host"] = chips_per_host
    config = _with(change, "tpu_slice_groups")
    config["pools"][1]["chips_per_unit"] = math.prod(int(d) for d in topology.split("x"))
    return config


@pytest.mark.parametrize(
    ("machine_type", "topology", "chips_per_host", "hosts"),
    [("ct6e-standard-8t", "2x4", 8, 1), ("ct6e-standard-4t", "4x8", 4, 8), ("ct6e-standard-4t", "4x4", 4, 4),
     ("ct5lp-hightpu-4t", "4x4", 4, 4), ("ct5lp-hightpu-1t", "1x1", 1, 1), ("ct5p-hightpu-4t", "2x2x2", 4, 2),
     ("tpu-custom", "4x4", 4, 4)],
)  # fmt: skip
def test_chips_per_host_unset_comes_from_the_machine_type(
    machine_type: str, topology: str, chips_per_host: int, hosts: int
) -> None:
    """The ``-<N>t`` suffix is the machine type's chips per VM; a machine type without one keeps the default 4.
    The slice actuator creates each slice's node pool with ``hosts_per_slice`` nodes."""
    settings = settings_from_mapping(_slice_type(machine_type, topology))
    assert settings.cloud is not None
    mapping = settings.cloud.tpu_slice_groups[0]
    assert (mapping.chips_per_host, mapping.hosts_per_slice) == (chips_per_host, hosts)


@pytest.mark.parametrize(
    ("machine_type", "chips_per_host", "per_vm"), [("ct6e-standard-4t", 2, 4), ("ct5lp-hightpu-4t", 8, 4)]
)
def test_an_explicit_chips_per_host_that_the_machine_type_contradicts_is_refused(
    machine_type: str, chips_per_host: int, per_vm: int
) -> None:
    (problem,) = _problems(_slice_type(machine_type, "4x8", chips_per_host))
    assert problem.startswith(
        f"cloud.tpu_slice_groups[0].chips_per_host: {chips_per_host} but machine type {machine_type} has {per_vm} "
        "chips per host"
    )


def test_an_explicit_chips_per_host_that_agrees_or_has_nothing_to_agree_with_loads() -> None:
    for machine_type, chips_per_host in (("ct6e-standard-4t", 4), ("tpu-custom", 8), ("tpu-custom", 2)):
        settings = settings_from_mapping(_slice_type(machine_type, "4x8", chips_per_host))
        assert settings.cloud is not None and settings.cloud.tpu_slice_groups[0].chips_per_host == chips_per_host
