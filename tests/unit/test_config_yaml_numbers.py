"""Numbers in a configuration file are read as YAML 1.2 reads them: YAML 1.1's base-60 forms (``1:30`` as 90,
``10:30`` as 630) and octal ``010`` are gone, so a time of day loads as written and a duration written with a
colon reaches the duration parser as text and is refused with its own message."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from config import load_settings
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


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    return [str(p) for p in refused.value.problems]


@pytest.mark.parametrize("at", ["10:30", "08:00", "23:59"])
def test_an_unquoted_time_of_day_loads_as_written(tmp_path: Path, at: str) -> None:
    settings = load_settings(_write(tmp_path, VALID + f"daemon:\n  daily_report_at: {at}\n"))
    assert settings.daemon.daily_report_at == at


@pytest.mark.parametrize("written", ["1:30", "1:30:00"])
def test_a_duration_with_colons_is_refused_by_the_duration_parser(tmp_path: Path, written: str) -> None:
    path = _write(tmp_path, VALID.replace("lead_time: 10m", f"lead_time: {written}"))
    assert _problems(path) == [
        f"pools[0].lead_time: cannot read '{written}' as a duration; write e.g. '90s', '10m', '1h30m', '7d' or seconds"
    ]


@pytest.mark.parametrize(
    ("written", "units"),
    [("010", 10), ("8", 8), ("+8", 8), ("0x10", 16), ("0o10", 8), ("1e1", 10)],
)
def test_integers_are_decimal_unless_marked(tmp_path: Path, written: str, units: int) -> None:
    settings = load_settings(_write(tmp_path, VALID.replace("max_units: 5", f"max_units: {written}")))
    assert settings.pools[0].max_units == units


@pytest.mark.parametrize(("written", "seconds"), [("90", 90.0), ("1.5", 1.5), ("1e3", 1000.0), (".5", 0.5)])
def test_plain_numbers_are_still_numbers(tmp_path: Path, written: str, seconds: float) -> None:
    text = VALID.replace("lead_time: 10m", f"lead_time: {written}").replace("2.0", written)
    settings = load_settings(_write(tmp_path, text))
    assert settings.pools[0].lead_time == timedelta(seconds=seconds)
    assert settings.pools[0].price_per_chip_hour_usd == seconds


def test_a_true_where_a_number_belongs_is_still_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, VALID.replace("price_per_chip_hour_usd: 2.0", "price_per_chip_hour_usd: yes"))
    assert _problems(path) == ["pools[0].price_per_chip_hour_usd: must be a number, got True (a YAML true/false)"]
