"""The ``energy`` section: defaults, per-pool watts, and bad values named by their key."""

from __future__ import annotations

from typing import Any

import pytest

from config import settings_from_mapping
from models import ConfigError


def _config(energy: dict[str, Any] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "demand_classes": [{"name": "a"}, {"name": "t", "family": "tpu"}],
        "pools": [
            {
                "id": "gpu",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "max_units": 4,
                "price_per_chip_hour_usd": 3.0,
                "lead_time": "10m",
                "serves": ["a"],
            },
            {
                "id": "tpu",
                "kind": "tpu-slice-group",
                "family": "tpu",
                "chips_per_unit": 32,
                "max_units": 4,
                "price_per_chip_hour_usd": 1.2,
                "lead_time": "30m",
                "serves": ["t"],
            },
        ],
    }
    if energy is not None:
        config["energy"] = energy
    return config


def test_defaults_and_per_pool_watts() -> None:
    assert settings_from_mapping(_config()).energy.watts("gpu") == 400.0
    energy = settings_from_mapping(_config({"watts_per_chip": 700, "pool_watts_per_chip": {"tpu": 250}})).energy
    assert (energy.watts("gpu"), energy.watts("tpu"), energy.pue) == (700.0, 250.0, 1.1)


@pytest.mark.parametrize(
    ("energy", "key", "message"),
    [
        ({"pool_watts_per_chip": {"h100": 700}}, "energy.pool_watts_per_chip.h100", "unknown pool 'h100'"),
        ({"pool_watts_per_chip": {"tpu": 0}}, "energy.pool_watts_per_chip.tpu", "must be in (0, 5000]"),
        ({"pue": 0.9}, "energy.pue", "greater than or equal to 1"),
        ({"grid_gco2e_per_kwh": -1}, "energy.grid_gco2e_per_kwh", "greater than or equal to 0"),
        ({"watts": 400}, "energy.watts", "unknown key"),
    ],
)
def test_bad_values_are_named_by_their_key(energy: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping(_config(energy))
    text = str(caught.value)
    assert key in text and message in text, text
