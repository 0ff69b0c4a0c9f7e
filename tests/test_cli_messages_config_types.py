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


EXAMPLES = Path(__file__).resolve().parents[1] / "config" / "examples"


@pytest.mark.parametrize(
    ("key", "written", "example"),
    [
        ("pools", "a100-on-demand", "`- id: a100-on-demand`"),
        ("demand_classes", "train-a100", "`- name: train-a100`"),
        ("aws.nodegroups", "aws-p4d-on-demand", "`- pool: aws-p4d-on-demand`"),
        ("aws.auto_scaling_groups", "aws-p4d-spot", "`- pool: aws-p4d-spot`"),
        ("cloud.tpu_slice_groups", "gke-v5e-slices", "`- pool: gke-v5e-slices`"),
    ],
)
def test_a_single_name_where_a_list_of_sections_belongs_is_shown_a_section(
    tmp_path: Path, key: str, written: str, example: str
) -> None:
    """The example of a list of sections was the name in brackets ('pools: should be a list, e.g. [a100-on-demand]'),
    and written so it was refused again ('pools[0]: should be a mapping, e.g. `- id: a100-on-demand`'): it is now
    an item of the list with its first key, and written as shown the list has the right shape at once."""
    config = yaml.safe_load((EXAMPLES / "hybrid-aws-gke.yaml").read_text(encoding="utf-8"))
    *parents, last = key.split(".")
    section = config
    for parent in parents:
        section = section[parent]
    section[last] = written

    assert f"{key}: should be a list, e.g. {example} (got '{written}')" in _problems(tmp_path, config)

    section[last] = yaml.safe_load(example.strip("`"))
    assert not any("should be a" in p for p in _problems_or_none(tmp_path, config))


def test_a_list_of_names_keeps_its_example_in_brackets(tmp_path: Path) -> None:
    config = {"demand_classes": [{"name": "train-a100"}], "pools": [_pool(serves={"name": "train-a100"})]}
    assert _problems(tmp_path, config) == ["pools[0].serves: should be a list, e.g. [...]"]


def _problems_or_none(tmp_path: Path, config: dict[str, Any]) -> list[str]:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    try:
        load_settings(path)
    except ConfigError as refused:
        return [str(p) for p in refused.problems]
    return []
