"""The tier of an on-prem pool: it defaults to ``on-prem`` (filled first, its cost being sunk), and a tier that
contradicts the kind is refused with its key path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from config import settings_from_mapping
from models import CapacityTier, ConfigError
from tests.conftest import TraceWriter


def _pools(onprem_tier: str | None = None, cloud_tier: str = "spot") -> list[dict[str, Any]]:
    onprem: dict[str, Any] = {
        "id": "op",
        "kind": "on-prem",
        "chips_per_unit": 8,
        "min_units": 3,
        "max_units": 3,
        "price_per_chip_hour_usd": 0.0,
        "lead_time": "0s",
        "serves": ["a", "b"],
    }
    if onprem_tier is not None:
        onprem["tier"] = onprem_tier
    cloud = {
        "id": "cloud",
        "kind": "gpu-node-pool",
        "tier": cloud_tier,
        "chips_per_unit": 8,
        "max_units": 10,
        "price_per_chip_hour_usd": 1.0,
        "lead_time": "10m",
        "serves": ["a", "b"],
    }
    return [onprem, cloud]


def _raw(onprem_tier: str | None = None, cloud_tier: str = "spot") -> dict[str, Any]:
    return {"demand_classes": [{"name": "a"}, {"name": "b"}], "pools": _pools(onprem_tier, cloud_tier)}


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping(raw, source="test.yaml")
    return [str(p) for p in caught.value.problems]


def test_an_on_prem_pool_without_a_tier_is_filled_before_spot() -> None:
    onprem, cloud = settings_from_mapping(_raw(), source="test.yaml").pool_specs()
    assert onprem.tier is CapacityTier.ON_PREM
    assert onprem.fill_key < cloud.fill_key
    default_cloud = _raw()
    del default_cloud["pools"][1]["tier"]
    assert settings_from_mapping(default_cloud, source="test.yaml").pool_specs()[1].tier is CapacityTier.ON_DEMAND


@pytest.mark.parametrize("tier", ["spot", "on-demand", "reserved"])
def test_an_on_prem_pool_of_a_cloud_tier_is_refused(tier: str) -> None:
    (problem,) = _problems(_raw(onprem_tier=tier))
    assert problem.startswith("pools[0].tier: ")
    assert f"an on-prem pool is tier 'on-prem', not {tier!r}" in problem


@pytest.mark.parametrize("kind", ["gpu-node-pool", "tpu-slice-group"])
def test_a_cloud_pool_of_the_on_prem_tier_is_refused(kind: str) -> None:
    raw = _raw(cloud_tier="on-prem")
    raw["pools"][1]["kind"] = kind
    raw["pools"][1]["family"] = "tpu" if kind == "tpu-slice-group" else "gpu"
    raw["demand_classes"] = [{"name": "a"}, {"name": "b", "family": raw["pools"][1]["family"]}]
    raw["pools"][1]["serves"] = ["b"]
    raw["pools"][0]["serves"] = ["a"]
    (problem,) = _problems(raw)
    assert problem.startswith("pools[1].tier: ")
    assert f"tier 'on-prem' is for kind 'on-prem' pools; a {kind} pool" in problem


def test_a_simulation_serves_from_an_on_prem_pool_without_a_tier_before_paying_for_spot(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace({"a": [10.0] * 24, "b": [4.0] * 24})  # 14 chips: within on-prem's 24
    config = tmp_path / "onprem.yaml"
    config.write_text(yaml.safe_dump(_raw()), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--policy", "reactive", "--out", str(out)]
    window = ["--start", "2024-01-01T00:00:00+00:00", "--end", "2024-01-01T02:00:00+00:00"]
    assert main([*argv, *window, "--equal-service", "none", "--no-progress"]) == 0
    capsys.readouterr()
    run = json.loads((out / "results.json").read_text(encoding="utf-8"))["policies"]["reactive"]
    assert run["unserved_accelerator_hours"] == 0.0
    assert run["spend_by_pool_usd"] == {"op": 0.0, "cloud": 0.0}


def test_validate_config_names_the_contradictory_tier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "onprem.yaml"
    config.write_text(yaml.safe_dump(_raw(onprem_tier="on-demand")), encoding="utf-8")
    assert main(["validate-config", str(config)]) != 0
    assert "pools[0].tier: an on-prem pool is tier 'on-prem', not 'on-demand'" in capsys.readouterr().err
