"""``ledger.billing.pools`` and ``ledger.billing.resource_prefixes`` are keyed by pool id: an id of no pool (this
agent's, or a budget's remote pool) is refused at load as ``energy.pool_watts_per_chip`` refuses one, with the
known pools, instead of matching no billed row."""

from __future__ import annotations

from typing import Any

import pytest

from config.loader import settings_from_mapping
from models import ConfigError


def _raw(billing: dict[str, Any], remote_pools: tuple[str, ...] = ()) -> dict[str, Any]:
    pool = {
        "id": "od",
        "kind": "gpu-node-pool",
        "tier": "on-demand",
        "chips_per_unit": 8,
        "min_units": 0,
        "max_units": 10,
        "price_per_chip_hour_usd": 3.0,
        "lead_time": "10m",
        "serves": ["a"],
    }
    budget: dict[str, Any] = {"name": "main", "pools": ["od"], "monthly_cap_usd": 1000}
    if remote_pools:
        budget["remote_pools"] = list(remote_pools)
    return {
        "demand_classes": [{"name": "a"}],
        "pools": [pool],
        "budgets": [budget],
        "ledger": {"backend": "postgresql", "url": "postgresql://leadtime@127.0.0.1:5432/ledger", "billing": billing},
    }


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping(raw)
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize("key", ["pools", "resource_prefixes"])
def test_a_billing_mapping_of_an_unknown_pool_is_refused_with_the_known_pools(key: str) -> None:
    assert _problems(_raw({key: {"zz": "np"}}, remote_pools=("eu-a100",))) == [
        f"ledger.billing.{key}.zz: unknown pool 'zz' (known: eu-a100, od)"
    ]


def test_this_agents_pools_and_the_remote_ones_are_accepted() -> None:
    billing = {"pools": {"od": "a100-pool", "eu-a100": "eu-pool"}, "resource_prefixes": {"od": "gke-a100-"}}
    settings = settings_from_mapping(_raw(billing, remote_pools=("eu-a100",)))
    assert settings.ledger.billing.pools == {"od": "a100-pool", "eu-a100": "eu-pool"}
