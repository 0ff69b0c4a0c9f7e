"""An interruption rate is for spot pools only: the planner reserves for interruptions on spot pools alone, while the
simulated cluster interrupts any pool given a rate, so a rate on another tier is refused at load."""

from __future__ import annotations

from typing import Any

import pytest

from config import settings_from_mapping
from models import CapacityTier, ConfigError


def _config(**pool: Any) -> dict[str, Any]:
    base = {"id": "p", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
            "lead_time": "10m", "serves": ["c"]}  # fmt: skip
    return {"demand_classes": [{"name": "c"}], "pools": [{**base, **pool}]}


@pytest.mark.parametrize(
    ("pool", "given"),
    [
        ({}, "tier 'on-demand' (the default for its kind)"),
        ({"tier": "on-demand"}, "tier 'on-demand'"),
        ({"tier": "reserved"}, "tier 'reserved'"),
        ({"kind": "on-prem", "min_units": 4}, "tier 'on-prem' (the default for its kind)"),
    ],
)
def test_an_interruption_rate_on_a_pool_that_is_not_spot_is_refused(pool: dict[str, Any], given: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from_mapping(_config(**pool, spot_interruption_per_hour=0.05), source="c.yaml")
    assert [str(p) for p in refused.value.problems] == [
        f"pools[0].spot_interruption_per_hour: pool 'p' is {given}, and only spot pools are interrupted: the planner "
        "would ignore 0.05 interruptions an hour that the simulator applies; set tier: spot or remove "
        "spot_interruption_per_hour"
    ]


def test_a_spot_pool_takes_an_interruption_rate() -> None:
    (pool,) = settings_from_mapping(_config(tier="spot", spot_interruption_per_hour=0.05)).pool_specs()
    assert (pool.tier, pool.spot_interruption_per_hour) == (CapacityTier.SPOT, 0.05)


@pytest.mark.parametrize("tier", ["on-demand", "reserved"])
def test_a_rate_of_zero_is_accepted_on_any_tier(tier: str) -> None:
    (pool,) = settings_from_mapping(_config(tier=tier, spot_interruption_per_hour=0)).pool_specs()
    assert pool.spot_interruption_per_hour == 0.0
