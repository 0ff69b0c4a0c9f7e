"""Two demand classes that read the same demand (the same series, or Prometheus queries that read the same thing)
are refused at load, naming both classes: the demand would be counted twice and the pools sized on double."""

from __future__ import annotations

from typing import Any

import pytest

from agent.sources.prometheus_queries import demand_queries
from config import settings_from_mapping
from config.schema import Settings
from models import ConfigError


def _config(classes: list[dict[str, Any]], prometheus: dict[str, Any] | None = None) -> dict[str, Any]:
    gpu = [c["name"] for c in classes if c.get("family", "gpu") == "gpu"]
    tpu = [c["name"] for c in classes if c.get("family") == "tpu"]
    pool = {"kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
            "lead_time": "10m"}  # fmt: skip
    pools = [{**pool, "id": "gpu", "serves": gpu}]
    if tpu:
        pools.append({**pool, "id": "tpu", "kind": "tpu-slice-group", "family": "tpu", "serves": tpu})
    raw: dict[str, Any] = {"demand_classes": classes, "pools": pools}
    if prometheus is not None:
        raw["prometheus"] = {"url": "http://prometheus:9090", **prometheus}
    return raw


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        settings_from_mapping(raw, source="c.yaml")
    return [str(p) for p in refused.value.problems]


def _built_queries(raw: dict[str, Any]) -> list[str]:
    """The demand queries the agent would send, from the settings before the rules across sections run."""
    settings = Settings.model_validate(raw)
    assert settings.prometheus is not None
    return list(demand_queries(settings.demand_class_models(), settings.prometheus).values())


@pytest.mark.parametrize("prometheus", [None, {}, {"demand_metrics": "kueue"}])
def test_a_class_reading_the_series_of_another_is_refused_naming_both(prometheus: dict[str, Any] | None) -> None:
    raw = _config([{"name": "a100"}, {"name": "a100-batch", "series": "a100"}], prometheus)
    assert _problems(raw) == [
        "demand_classes[1].series: demand classes 'a100' and 'a100-batch' both read the gpu demand of series 'a100': "
        "it would be counted twice and their pools sized on double; give each class a series of its own"
    ]
    if prometheus is not None:
        first, second = _built_queries(raw)
        assert first == second  # what the agent would have read twice


def test_two_classes_naming_the_same_series_are_refused() -> None:
    raw = _config([{"name": "a", "series": "team"}, {"name": "b"}, {"name": "c", "series": "team"}])
    (problem,) = _problems(raw)
    assert problem.startswith("demand_classes[2].series: demand classes 'a' and 'c' both read the gpu demand")


def test_classes_of_different_families_may_share_a_series() -> None:
    raw = _config([{"name": "team-gpu", "series": "team"}, {"name": "team-tpu", "series": "team", "family": "tpu"}], {})
    settings = settings_from_mapping(raw)
    assert [c.series for c in settings.demand_classes] == ["team", "team"]
    first, second = _built_queries(raw)
    assert first != second  # nvidia.com/gpu against google.com/tpu


@pytest.mark.parametrize(
    ("prometheus", "key"),
    [
        ({"classes": {"a": {"selector": 'namespace="x"'}, "b": {"selector": 'namespace="x"'}}}, "selector"),
        ({"classes": {"b": {"selector": 'namespace="a"'}}}, "selector"),  # a's default selector
        ({"classes": {"a": {"query": "sum(x)"}, "b": {"query": "sum(x)"}}}, "query"),
        (
            {
                "classes": {
                    "a": {"selector": 'namespace="x"'},
                    "b": {"selector": 'namespace="x"', "resource": "nvidia.com/gpu"},
                }
            },
            "selector",
        ),  # the resource written is the default one
        (
            {"demand_metrics": "kueue", "classes": {"b": {"selector": 'cluster_queue="a"'}}},
            "selector",
        ),
    ],
)
def test_two_classes_whose_built_queries_are_the_same_are_refused(prometheus: dict[str, Any], key: str) -> None:
    raw = _config([{"name": "a"}, {"name": "b"}], prometheus)
    first, second = _built_queries(raw)
    assert first == second
    what = "query" if key == "query" else "selector and resource"
    assert _problems(raw) == [
        f"prometheus.classes.b.{key}: demand classes 'a' and 'b' read the same demand from Prometheus (the same "
        f"{what}): it would be counted twice and their pools sized on double; give each class a selector or query of "
        "its own"
    ]


@pytest.mark.parametrize(
    "classes",
    [
        {"a": {"selector": 'namespace="x", pod=~"train-.*"'}, "b": {"selector": "pod=~'train-.*',namespace = \"x\""}},
        {"a": {"query": "sum(x)"}, "b": {"query": " sum(x)\n"}},
    ],
)
def test_queries_that_differ_only_in_spacing_order_or_quotes_are_refused(classes: dict[str, Any]) -> None:
    (problem,) = _problems(_config([{"name": "a"}, {"name": "b"}], {"classes": classes}))
    assert problem.startswith("prometheus.classes.b.") and "demand classes 'a' and 'b' read the same demand" in problem


@pytest.mark.parametrize(
    "classes",
    [
        {"a": {"selector": 'namespace="x"'}, "b": {"selector": 'namespace="y"'}},
        {"a": {"selector": 'namespace="x"'}, "b": {"selector": 'namespace="x"', "resource": "nvidia.com/mig-1g.5gb"}},
        {"a": {"selector": 'namespace="x"'}, "b": {"selector": 'namespace!="x"'}},
        {"a": {"query": "sum(x)"}, "b": {"query": "sum(y)"}},
    ],
)
def test_classes_reading_different_demand_are_accepted(classes: dict[str, Any]) -> None:
    raw = _config([{"name": "a"}, {"name": "b"}], {"classes": classes})
    assert [c.name for c in settings_from_mapping(raw).demand_classes] == ["a", "b"]
    first, second = _built_queries(raw)
    assert first != second
