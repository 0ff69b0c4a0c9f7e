"""``daemon.misfire_grace`` below a second is refused at load: the scheduler takes a tick's misfire grace in whole
seconds (``agent.daemon.runtime`` passes at least 1), so ``0`` or ``100ms`` ran as a grace of one second, and a
tick that started two seconds late was dropped whatever the file said."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from config import settings_from_mapping
from models import ConfigError

BASE: dict[str, Any] = {
    "demand_classes": [{"name": "train"}],
    "pools": [
        {
            "id": "a100",
            "kind": "gpu-node-pool",
            "chips_per_unit": 8,
            "max_units": 4,
            "price_per_chip_hour_usd": 3.67,
            "lead_time": "10m",
            "serves": ["train"],
        }
    ],
}


@pytest.mark.parametrize(("grace", "shown"), [(0, "got 0s"), ("0s", "got 0s"), ("100ms", "got 100ms")])
def test_a_misfire_grace_below_a_second_is_refused_naming_the_key(grace: object, shown: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, "daemon": {"misfire_grace": grace}})
    (problem,) = caught.value.problems
    assert problem.key_path == "daemon.misfire_grace"
    assert "must be at least 1s" in problem.message
    assert shown in problem.message


@pytest.mark.parametrize(("grace", "expected"), [("1s", timedelta(seconds=1)), ("90s", timedelta(seconds=90))])
def test_a_misfire_grace_of_a_second_or_more_loads_as_written(grace: str, expected: timedelta) -> None:
    assert settings_from_mapping({**BASE, "daemon": {"misfire_grace": grace}}).daemon.misfire_grace == expected


def test_the_default_misfire_grace_loads() -> None:
    assert settings_from_mapping(BASE).daemon.misfire_grace == timedelta(seconds=30)
