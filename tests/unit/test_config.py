"""Configuration: the examples load, and every kind of mistake gets one clear problem with its key path."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from agent.cli import main
from agent.sources import read_trace
from config import load_settings, parse_duration, settings_from_mapping
from models import ConfigError, PoolKind


def minimal() -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "train"}, {"name": "tpu-serve", "family": "tpu"}],
        "pools": [
            {
                "id": "gpu",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "max_units": 10,
                "price_per_chip_hour_usd": 3.0,
                "lead_time": "10m",
                "serves": ["train"],
            },
            {
                "id": "slices",
                "kind": "tpu-slice-group",
                "family": "tpu",
                "chips_per_unit": 32,
                "max_units": 4,
                "price_per_unit_hour_usd": 40.0,
                "lead_time": "30m",
                "serves": ["tpu-serve"],
            },
        ],
    }


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping(raw, source="test.yaml")
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize("name", ["helios-earth.yaml", "helios-earth-slices.yaml"])
def test_reference_scenarios_load(examples: Path, name: str) -> None:
    settings = load_settings(examples / name)
    assert len(settings.demand_classes) == 16
    assert all(c.name.startswith("earth/vc") for c in settings.demand_classes)


def test_pooled_reference_scenario_keeps_its_meaning(examples: Path) -> None:
    (pool,) = load_settings(examples / "helios-earth.yaml").pool_specs()
    assert (pool.kind, pool.chips_per_unit, pool.min_units, pool.max_units) == (PoolKind.GPU_NODE_POOL, 8, 0, 200)
    assert pool.lead_time == timedelta(minutes=10)
    assert pool.price_per_chip_hour_usd == pytest.approx(3.67)
    assert len(pool.serves) == 16


def test_slices_reference_scenario_keeps_its_meaning(examples: Path) -> None:
    pools = load_settings(examples / "helios-earth-slices.yaml").pool_specs()
    assert len(pools) == 16
    for pool in pools:
        assert (pool.kind, pool.chips_per_unit, pool.max_units) == (PoolKind.TPU_SLICE_GROUP, 32, 16)
        assert pool.lead_time == timedelta(minutes=30)
        assert pool.price_per_chip_hour_usd == pytest.approx(1.20)
        assert len(pool.serves) == 1


def test_llm_serving_reference_scenario_keeps_its_meaning(examples: Path) -> None:
    settings = load_settings(examples / "servegen-llm.yaml")
    assert [c.name for c in settings.demand_classes] == ["servegen/m-large", "servegen/m-mid", "servegen/deepseek-r1"]
    pools = settings.pool_specs()
    assert len(pools) == 3
    for pool in pools:
        assert (pool.kind, pool.chips_per_unit, pool.min_units) == (PoolKind.GPU_NODE_POOL, 8, 0)
        assert pool.lead_time == timedelta(minutes=15)
        assert len(pool.serves) == 1
    trace = read_trace(examples.parents[1] / "data" / "servegen" / "demand_10min.csv.gz")
    assert set(trace.series) == {c.name for c in settings.demand_classes}
    assert trace.step == timedelta(minutes=10)
    assert np.isnan(trace.values).any()  # collection gaps are empty cells, never zero


def test_unknown_key_is_named_with_its_path() -> None:
    raw = minimal()
    raw["pools"][0]["lead_tme"] = "5m"
    assert problems_of(raw) == ["pools[0].lead_tme: unknown key (check its spelling and the section it is in)"]


def test_negative_lead_time_is_refused() -> None:
    raw = minimal()
    raw["pools"][1]["lead_time"] = "-5m"
    (problem,) = problems_of(raw)
    assert problem.startswith("pools[1].lead_time: duration must not be negative")


def test_every_problem_is_reported_at_once() -> None:
    raw = minimal()
    raw["pools"][0]["min_units"] = 20
    raw["pools"][0]["serves"] = ["train", "inference"]
    raw["pools"][1]["serves"] = ["train"]
    found = problems_of(raw)
    assert "pools[0].min_units: min_units (20) must not exceed max_units (10)" in found
    assert any(p.startswith("pools[0].serves[1]: unknown demand class 'inference'") for p in found)
    assert any(p.startswith("pools[1].serves[0]: demand class 'train' needs gpu") for p in found)
    assert "demand_classes[1]: no pool serves demand class 'tpu-serve'" in found


def test_missing_required_key_and_bad_type() -> None:
    raw = minimal()
    del raw["pools"][0]["chips_per_unit"]
    raw["pools"][1]["max_units"] = "many"
    found = problems_of(raw)
    assert "pools[0].chips_per_unit: required key is missing" in found
    assert any(p.startswith("pools[1].max_units: ") and "'many'" in p for p in found)


def test_price_must_be_given_once() -> None:
    raw = minimal()
    raw["pools"][0]["price_per_unit_hour_usd"] = 24.0
    assert problems_of(raw) == ["pools[0]: set only one of price_per_chip_hour_usd and price_per_unit_hour_usd"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("10m", timedelta(minutes=10)),
        ("1h30m", timedelta(minutes=90)),
        ("7d", timedelta(days=7)),
        (600, timedelta(minutes=10)),
        ("2.5", timedelta(seconds=2.5)),
    ],
)
def test_durations(text: object, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["ten minutes", "10 parsecs", "", "-1h", True])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_validate_config_command(tmp_path: Path, capsys: pytest.CaptureFixture[str], examples: Path) -> None:
    assert main(["validate-config", str(examples / "helios-earth.yaml")]) == 0
    assert "ok (16 demand classes, 1 pools" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    raw = minimal()
    raw["planner"] = {"service_level": 1.5}
    bad.write_text(yaml.safe_dump(raw))
    assert main(["validate-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "planner.service_level" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "no such file"), ("pools: [", "not valid YAML: line"), ("- just\n- a list\n", "mapping of settings")],
)
def test_unreadable_files(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "c.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_settings(path)


def test_broken_rules_are_reported_with_the_basic_mistakes_of_other_sections() -> None:
    raw = minimal()
    raw["loop"] = {"tick_interval": "soon"}  # a basic mistake in a section no rule reads
    raw["budgets"] = [{"name": "cloud", "monthly_cap_usd": 1000, "pools": ["gpu", "gpus"]}]
    raw["pools"][1]["serves"] = ["train"]
    found = problems_of(raw)
    assert any(p.startswith("loop.tick_interval: ") for p in found), found
    assert "budgets[0].pools[1]: unknown pool 'gpus'" in found
    assert any(p.startswith("pools[1].serves[0]: demand class 'train' needs gpu") for p in found)


def test_a_budgets_remote_pools_must_not_be_this_agents_own() -> None:
    raw = minimal()
    raw["budgets"] = [{"name": "cloud", "monthly_cap_usd": 1000, "pools": ["gpu"], "remote_pools": ["east", "gpu"]}]
    assert problems_of(raw) == ["budgets[0].remote_pools[1]: 'gpu' is this agent's pool: list it in pools"]


def test_rules_that_read_an_invalid_section_are_not_run_on_a_guess() -> None:
    raw = minimal()
    raw["pools"][0]["lead_time"] = "-5m"  # pools is invalid: the rules over pools must not guess
    raw["budgets"] = [{"name": "cloud", "monthly_cap_usd": 1000, "pools": ["gpus"]}]
    found = problems_of(raw)
    assert [p for p in found if p.startswith("pools[0].lead_time")], found
    assert not [p for p in found if "unknown pool" in p or "no pool serves" in p], found


def test_naive_loads_as_itself_with_a_warning_that_its_meaning_changed() -> None:
    raw = minimal()
    raw["forecast"] = {"model": "naive"}
    with pytest.warns(FutureWarning, match="'naive' is now the calibrated last value"):
        settings = settings_from_mapping(raw)
    assert settings.forecast.model == "naive"
