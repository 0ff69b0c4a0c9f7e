"""``prometheus.timeout`` below a second is refused at load, as every other request timeout is: a timeout of 1ms
failed every query before it connected (the class read as unavailable at every tick), and a query over days of
history is not answered within a fraction of a second."""

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


@pytest.mark.parametrize(("timeout", "shown"), [(0, "got 0s"), ("1ms", "got 1ms"), ("500ms", "got 500ms")])
def test_a_query_timeout_below_a_second_is_refused_naming_the_key(timeout: object, shown: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, "prometheus": {"url": "http://prometheus:9090", "timeout": timeout}})
    (problem,) = caught.value.problems
    assert problem.key_path == "prometheus.timeout"
    assert f"must be at least 1s, {shown}" in problem.message


@pytest.mark.parametrize(("timeout", "expected"), [("1s", timedelta(seconds=1)), ("2500ms", timedelta(seconds=2.5))])
def test_a_timeout_of_a_second_or_more_loads_as_written(timeout: str, expected: timedelta) -> None:
    settings = settings_from_mapping({**BASE, "prometheus": {"url": "http://prometheus:9090", "timeout": timeout}})
    assert settings.prometheus is not None
    assert settings.prometheus.timeout == expected
