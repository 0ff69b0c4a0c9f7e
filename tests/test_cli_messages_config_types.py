"""A configuration value of the wrong shape is refused in the configuration's words, under its dotted key: a
single name where a list belongs ('serves: train-a100') read 'Input should be a valid tuple', and a name where a
mapping belongs ('demand_classes: [train-a100]') read 'Input should be a valid dictionary or instance of
DemandClassSettings', words from the library that checks the file, naming a class the user never wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from config import load_settings
from models import ConfigError
from tests.scenario.test_simulate import run_cli


def _pool(**changes: Any) -> dict[str, Any]:
    pool = {
        "id": "a100-spot",
        "kind": "gpu-node-pool",
        "chips_per_unit": 8,
        "max_units": 4,
        "price_per_chip_hour_usd": 1.1,
        "lead_time": "8m",
        "serves": ["train-a100"],
    }
    return {**pool, **changes}


def _problems(tmp_path: Path, config: dict[str, Any]) -> list[str]:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    return [str(p) for p in refused.value.problems]


def test_a_single_name_where_a_list_belongs(tmp_path: Path) -> None:
    config = {"demand_classes": [{"name": "train-a100"}], "pools": [_pool(serves="train-a100")]}
    assert _problems(tmp_path, config) == ["pools[0].serves: should be a list, e.g. [train-a100] (got 'train-a100')"]


def test_a_name_where_a_mapping_belongs(tmp_path: Path) -> None:
    config = {"demand_classes": ["train-a100"], "pools": [_pool()]}
    assert _problems(tmp_path, config) == [
        "demand_classes[0]: should be a mapping, e.g. `- name: train-a100` (got 'train-a100')"
    ]


def test_a_section_and_a_budget_list_written_as_single_values(tmp_path: Path) -> None:
    config = {
        "demand_classes": [{"name": "train-a100"}],
        "pools": [_pool(), "a100-ondemand"],
        "forecast": "7d",
        "budgets": [{"name": "research", "pools": "a100-spot", "monthly_cap_usd": 500}],
    }
    problems = _problems(tmp_path, config)
    assert "pools[1]: should be a mapping, e.g. `- id: a100-ondemand` (got 'a100-ondemand')" in problems
    assert "forecast: should be a mapping, e.g. `model: ...` (got '7d')" in problems
    assert "budgets[0].pools: should be a list, e.g. [a100-spot] (got 'a100-spot')" in problems
    assert not any("valid tuple" in p or "valid dictionary" in p or "Settings" in p for p in problems)


def test_validate_config_prints_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"demand_classes": [{"name": "train-a100"}], "pools": [_pool(serves="train-a100")]}))
    assert run_cli(["validate-config", str(path)]) == 2
    assert "  - pools[0].serves: should be a list, e.g. [train-a100] (got 'train-a100')" in capsys.readouterr().err
