"""The configuration reference says what the code does: each description below is checked against the behaviour it
describes (``docs/configuration.md`` is generated from these texts)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.planning import resolve_service_levels
from config import settings_from_mapping
from config.field_docs import FIELDS, SECTIONS
from models import ConfigError

POOL: dict[str, Any] = {"id": "p", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "lead_time": "10m",
                        "serves": ["c"]}  # fmt: skip


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        settings_from_mapping(raw, source="c.yaml")
    return [str(p) for p in refused.value.problems]


def test_the_two_prices_are_described_as_one_or_the_other_as_the_loader_holds_them() -> None:
    pool = {**POOL, "price_per_chip_hour_usd": 3.0, "price_per_unit_hour_usd": 24.0}
    assert _problems({"demand_classes": [{"name": "c"}], "pools": [pool]}) == [
        "pools[0]: set only one of price_per_chip_hour_usd and price_per_unit_hour_usd"
    ]
    for key, other in (("price_per_chip_hour_usd", "price_per_unit_hour_usd"), ("price_per_unit_hour_usd", "")):
        text = FIELDS[f"PoolSettings.{key}"]
        assert "not both" in text and "precedence" not in text
        assert other in text


def test_the_prometheus_pool_settings_are_not_said_to_read_accelerator_activity() -> None:
    pool = {**POOL, "price_per_chip_hour_usd": 3.0}
    prometheus = {
        "url": "http://prometheus:9090",
        "pools": {"p": {"activity_query": "avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE)"}},
    }
    (problem,) = _problems({"demand_classes": [{"name": "c"}], "pools": [pool], "prometheus": prometheus})
    assert problem.startswith("prometheus.pools.p: activity_query is no longer read")
    texts = [SECTIONS["PrometheusSettings"], SECTIONS["PoolQuerySettings"], FIELDS["PrometheusSettings.pools"]]
    assert not [text for text in texts if "activity" in text]
    assert "capacity_query" in FIELDS["PrometheusSettings.pools"]


def test_a_waiting_cost_is_described_as_giving_way_to_a_service_level_as_the_planner_resolves_it() -> None:
    raw: dict[str, Any] = {
        "demand_classes": [{"name": "c", "waiting_cost_per_accelerator_hour_usd": 12.0}],
        "pools": [{**POOL, "price_per_chip_hour_usd": 3.0}],
    }
    by_cost = settings_from_mapping(raw)
    levels = resolve_service_levels(by_cost.demand_class_models(), by_cost.pool_specs(), by_cost.planner)
    assert levels == {"c": pytest.approx(12.0 / (12.0 + 3.0))}  # the newsvendor ratio against the chip-hour price
    by_planner = settings_from_mapping({**raw, "planner": {"service_level": 0.7}})
    levels = resolve_service_levels(by_planner.demand_class_models(), by_planner.pool_specs(), by_planner.planner)
    assert levels == {"c": 0.7}  # the planner's level wins over the class's waiting cost
    waiting = FIELDS["DemandClassSettings.waiting_cost_per_accelerator_hour_usd"]
    assert "the class's, else the planner's" in waiting and "chip-hour price" in waiting
    planner = FIELDS["PlannerSettings.service_level"]
    assert "wins over waiting costs" in planner and "unit price" not in planner
