"""A list that needs an item and is given none is said so by what its items are, not by pydantic's count of a
tuple's items."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import load_settings
from models import ConfigError

POOL = """\
  - id: od
    kind: gpu-node-pool
    chips_per_unit: 8
    min_units: 0
    max_units: 10
    price_per_chip_hour_usd: 3.0
    lead_time: 10m
    serves: {serves}
"""


def _problems(tmp_path: Path, text: str) -> list[str]:
    config = tmp_path / "c.yaml"
    config.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    return [str(problem) for problem in caught.value.problems]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("demand_classes:\n  - name: a\npools: []\n", "pools: at least one pool is required"),
        (
            "demand_classes: []\npools:\n" + POOL.format(serves="[a]"),
            "demand_classes: at least one demand class is required",
        ),
        (
            "demand_classes:\n  - name: a\npools:\n" + POOL.format(serves="[]"),
            "pools[0].serves: at least one demand class is required",
        ),
    ],
)
def test_an_empty_list_says_what_it_needs_one_of(text: str, said: str, tmp_path: Path) -> None:
    assert said in _problems(tmp_path, text)
