"""The configuration file itself: duplicate keys refused with the key and lines, a size limit checked before
parsing, one error per real mistake (no echo of a broken list as "too short"), bounded durations."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from config import load_settings
from config import loader as loader_module
from config.durations import parse_duration
from models import ConfigError

VALID = """\
demand_classes:
  - name: a
pools:
  - id: gpu
    kind: gpu-node-pool
    chips_per_unit: 4
    max_units: 5
    price_per_chip_hour_usd: 2.0
    lead_time: 10m
    serves: [a]
"""


def _problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    return [str(p) for p in refused.value.problems]


def test_the_valid_file_loads(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(VALID)
    assert load_settings(tmp_path / "c.yaml").pools[0].lead_time == timedelta(minutes=10)


def test_a_duplicate_key_is_refused_naming_the_key_and_both_lines(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(VALID + "forecast:\n  step: 5m\n  history: 1d\n  step: 1m\n")
    assert _problems(tmp_path / "c.yaml") == [
        "not valid YAML: line 14, column 3: duplicate key 'step' (first given on line 12)"
    ]


def test_a_duplicate_pool_key_is_refused(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(VALID + "    max_units: 50\n")
    (problem,) = _problems(tmp_path / "c.yaml")
    assert "duplicate key 'max_units' (first given on line 7)" in problem


def test_a_file_above_the_size_limit_is_refused_before_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader_module, "MAX_CONFIG_BYTES", 100)
    (tmp_path / "c.yaml").write_text(VALID)
    (problem,) = _problems(tmp_path / "c.yaml")
    assert problem == f"the file is {len(VALID):,} bytes, above the limit of 100 for a configuration"


def test_a_broken_pool_is_reported_once_without_a_false_too_short_error(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(VALID + "    colour: red\n")
    assert _problems(tmp_path / "c.yaml") == [
        "pools[0].colour: unknown key (check its spelling and the section it is in)"
    ]


def test_an_empty_pool_list_is_still_too_short(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("demand_classes:\n  - name: a\npools: []\n")
    (problem,) = _problems(tmp_path / "c.yaml")
    assert problem == "pools: at least one pool is required"


@pytest.mark.parametrize("value", ["1e400", "99999999999d", 1e308, float("inf"), "3651d"])
def test_durations_are_bounded(value: object) -> None:
    with pytest.raises(ValueError, match="duration must be at most 3650 days"):
        parse_duration(value)


def test_the_longest_duration_is_accepted() -> None:
    assert parse_duration("3650d") == timedelta(days=3650)


def test_a_nan_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="must be a number of seconds"):
        parse_duration(float("nan"))


def test_a_value_the_message_already_quotes_is_not_quoted_twice(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(VALID.replace("lead_time: 10m", "lead_time: -10m"))
    (problem,) = _problems(tmp_path / "c.yaml")
    assert problem == "pools[0].lead_time: duration must not be negative, got '-10m'"


def test_a_value_the_message_does_not_quote_is_quoted(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(VALID.replace("max_units: 5", "max_units: many"))
    (problem,) = _problems(tmp_path / "c.yaml")
    assert problem.startswith("pools[0].max_units: ")
    assert problem.endswith("(got 'many')")


def test_an_unreadable_duration_is_quoted_once(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(VALID.replace("lead_time: 10m", "lead_time: soon"))
    (problem,) = _problems(tmp_path / "c.yaml")
    assert problem.count("'soon'") == 1


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("chips_per_unit: 4", "chips_per_unit: true", "pools[0].chips_per_unit: must be a number, got True"),
        ("price_per_chip_hour_usd: 2.0", "price_per_chip_hour_usd: yes", "pools[0].price_per_chip_hour_usd: must"),
    ],
    ids=["boolean-count", "boolean-price"],
)
def test_a_number_must_be_written_as_a_number(tmp_path: Path, old: str, new: str, expected: str) -> None:
    """YAML's true (and yes) would be read as 1: a price of one dollar from a slip."""
    (tmp_path / "c.yaml").write_text(VALID.replace(old, new))
    (problem,) = _problems(tmp_path / "c.yaml")
    assert problem.startswith(expected)


def test_numbers_in_lists_are_numbers_too(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(VALID + "forecast:\n  quantiles: [0.5, true]\n")
    (problem,) = _problems(tmp_path / "c.yaml")
    assert problem.startswith("forecast.quantiles: must be a number, got True")


def test_a_number_in_exponent_notation_is_still_a_number(tmp_path: Path) -> None:
    """PyYAML reads 1e6 (no sign in the exponent) as the text '1e6'; a cap written so is meant as a number."""
    budget = "budgets:\n  - name: b\n    pools: [gpu]\n    monthly_cap_usd: 1e6\n"
    (tmp_path / "c.yaml").write_text(VALID + budget)
    assert load_settings(tmp_path / "c.yaml").budgets[0].monthly_cap_usd == 1e6


def test_repeated_entries_and_contradictory_caps_are_reported(tmp_path: Path) -> None:
    broken = VALID.replace("serves: [a]", "serves: [a, a]") + (
        "forecast:\n  quantiles: [0.9, 0.5, 0.9]\n"
        "budgets:\n  - name: b\n    pools: [gpu, gpu]\n    monthly_cap_usd: 100\n    hourly_cap_usd: 1000\n"
    )
    (tmp_path / "c.yaml").write_text(broken)
    assert sorted(_problems(tmp_path / "c.yaml")) == [
        "budgets[0].hourly_cap_usd: 1000 USD an hour is more than the whole monthly cap (100 USD): check the two caps",
        "budgets[0].pools: pool 'gpu' is listed 2 times; list it once",
        "forecast.quantiles: quantile 0.9 is listed 2 times; list it once",
        "pools[0].serves: demand class 'a' is listed 2 times; list it once",
    ]


def test_a_stockout_window_must_end_after_it_starts(tmp_path: Path) -> None:
    window = "simulation:\n  stockouts:\n    - {pool: gpu, start: '2020-05-09T00:00', end: '2020-05-08T00:00+00:00'}\n"
    (tmp_path / "c.yaml").write_text(VALID + window)
    assert _problems(tmp_path / "c.yaml") == [
        "simulation.stockouts[0].end: must be after start (2020-05-09T00:00); got 2020-05-08T00:00+00:00"
    ]


def test_a_directory_is_not_reported_as_missing(tmp_path: Path) -> None:
    assert _problems(tmp_path) == ["this is a directory: give the configuration file in it"]
