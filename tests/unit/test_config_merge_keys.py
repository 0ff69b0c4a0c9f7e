"""YAML merge keys in a configuration file: ``<<: *defaults`` brings the keys of another mapping, the keys written
beside it win (as YAML specifies), and a key written twice in one mapping is still refused."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from config import load_settings
from models import CapacityTier, ConfigError

HEAD = """\
demand_classes:
  - name: a100
pools:
  - &spot
    id: a100-spot
    kind: gpu-node-pool
    tier: spot
    chips_per_unit: 8
    max_units: 16
    price_per_chip_hour_usd: 1.47
    lead_time: 10m
    serves: [a100]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    return [str(p) for p in refused.value.problems]


def test_a_pool_merged_from_another_takes_its_keys_and_overrides_some(tmp_path: Path) -> None:
    text = HEAD + "  - <<: *spot\n    id: a100-od\n    tier: on-demand\n    price_per_chip_hour_usd: 3.67\n"
    spot, on_demand = load_settings(_write(tmp_path, text)).pools
    assert (on_demand.id, on_demand.tier, on_demand.price_per_chip_hour_usd) == (
        "a100-od",
        CapacityTier.ON_DEMAND,
        3.67,
    )
    assert (on_demand.kind, on_demand.chips_per_unit, on_demand.max_units) == (spot.kind, 8, 16)
    assert on_demand.lead_time == timedelta(minutes=10) and on_demand.serves == ("a100",)
    assert (spot.id, spot.tier, spot.price_per_chip_hour_usd) == ("a100-spot", CapacityTier.SPOT, 1.47)


def test_a_key_overridden_in_a_merged_mapping_keeps_the_override(tmp_path: Path) -> None:
    text = (
        HEAD
        + "  - &od\n    <<: *spot\n    id: a100-od\n    tier: on-demand\n    price_per_chip_hour_usd: 3.67\n"
        + "  - <<: *od\n    id: a100-od-2\n"
    )
    third = load_settings(_write(tmp_path, text)).pools[2]
    assert (third.id, third.tier, third.price_per_chip_hour_usd, third.max_units) == (
        "a100-od-2",
        CapacityTier.ON_DEMAND,
        3.67,
        16,
    )


def test_of_a_list_of_merged_mappings_the_earlier_wins(tmp_path: Path) -> None:
    text = HEAD + (
        "  - &big\n    <<: *spot\n    id: a100-big\n    max_units: 64\n    lead_time: 20m\n"
        "  - <<: [{max_units: 4}, *big]\n    id: a100-small\n"
    )
    small = load_settings(_write(tmp_path, text)).pools[2]
    assert (small.id, small.max_units, small.lead_time, small.tier) == (
        "a100-small",
        4,
        timedelta(minutes=20),
        CapacityTier.SPOT,
    )


def test_a_key_written_twice_beside_a_merge_key_is_refused(tmp_path: Path) -> None:
    text = HEAD + "  - <<: *spot\n    id: a100-od\n    max_units: 4\n    max_units: 8\n"
    assert _problems(_write(tmp_path, text)) == [
        "not valid YAML: line 16, column 5: duplicate key 'max_units' (first given on line 15)"
    ]


def test_two_merge_keys_in_one_mapping_are_refused(tmp_path: Path) -> None:
    text = HEAD + "  - <<: *spot\n    <<: *spot\n    id: a100-od\n"
    assert _problems(_write(tmp_path, text)) == [
        "not valid YAML: line 14, column 5: duplicate key '<<' (first given on line 13)"
    ]


def test_merging_something_else_than_a_mapping_is_refused(tmp_path: Path) -> None:
    text = HEAD + "  - <<: 5\n    id: a100-od\n"
    assert _problems(_write(tmp_path, text)) == [
        "not valid YAML: line 13, column 9: expected a mapping or a list of mappings to merge, but found scalar"
    ]
