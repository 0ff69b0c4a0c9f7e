"""The default queries per exporter and their overrides, and the ``prometheus`` configuration section."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agent.sources.prometheus_queries import demand_query, quote
from config import settings_from_mapping
from config.prometheus import PrometheusSettings
from models import AcceleratorFamily, ConfigError, DemandClass

TPU = DemandClass("tpu-v5e", family=AcceleratorFamily.TPU)
GPU = DemandClass("gpu-a100", series="team-a")


def _settings(**values: Any) -> PrometheusSettings:
    return PrometheusSettings.model_validate({"url": "http://prometheus:9090", **values})


@pytest.mark.parametrize(
    ("demand_class", "metrics", "expected_parts"),
    [
        (GPU, "kube-state-metrics", ['resource="nvidia_com_gpu"', 'namespace="team-a"', "count(kube_node_info)"]),
        (TPU, "kube-state-metrics", ['resource="google_com_tpu"', 'namespace="tpu-v5e"', 'phase=~"Pending|Running"']),
        (GPU, "kueue", ['resource="nvidia.com/gpu"', 'cluster_queue="team-a"', "kueue_cluster_queue_resource_pending"]),
        (TPU, "kueue", ['resource="google.com/tpu"', 'cluster_queue="tpu-v5e"', "kueue_cluster_queue_resource_usage"]),
    ],
)
def test_default_demand_queries(demand_class: DemandClass, metrics: str, expected_parts: list[str]) -> None:
    query = demand_query(demand_class, _settings(demand_metrics=metrics))
    for part in expected_parts:
        assert part in query


def test_overrides_replace_the_selector_resource_or_whole_query() -> None:
    settings = _settings(
        demand_metrics="kueue",
        classes={
            "gpu-a100": {"selector": 'cluster_queue="research", flavor="a100-spot"', "resource": "nvidia.com/mig-1g"},
            "tpu-v5e": {"query": "sum(my_tpu_demand)"},
        },
    )
    gpu = demand_query(GPU, settings)
    assert 'flavor="a100-spot"' in gpu
    assert 'resource="nvidia.com/mig-1g"' in gpu
    assert "team-a" not in gpu
    assert demand_query(TPU, settings) == "sum(my_tpu_demand)"


def test_label_values_are_quoted_safely() -> None:
    assert quote('a"b\\c') == '"a\\"b\\\\c"'


def test_activity_keys_that_are_no_longer_read_are_refused_with_the_reason() -> None:
    for key in ("activity_query", "node_selector"):
        with pytest.raises(ConfigError) as caught:
            settings_from_mapping({**BASE, "prometheus": {"url": "http://p:9090", "pools": {"gpu": {key: "x"}}}})
        [problem] = [str(p) for p in caught.value.problems]
        assert problem.startswith("prometheus.pools.gpu: ") and f"{key} is no longer read" in problem, problem


BASE: dict[str, Any] = {
    "demand_classes": [{"name": "gpu-a100"}],
    "pools": [
        {
            "id": "a100",
            "kind": "gpu-node-pool",
            "chips_per_unit": 8,
            "max_units": 4,
            "price_per_chip_hour_usd": 3.0,
            "lead_time": "10m",
            "serves": ["gpu-a100"],
        }
    ],
}


def test_the_prometheus_section_is_optional_and_typed() -> None:
    assert settings_from_mapping(BASE).prometheus is None
    settings = settings_from_mapping(
        {**BASE, "prometheus": {"url": "https://prom.monitoring:9090/", "timeout": "10s", "max_staleness": "5m"}}
    )
    assert settings.prometheus is not None
    assert settings.prometheus.timeout == timedelta(seconds=10)
    assert settings.prometheus.max_staleness == timedelta(minutes=5)
    assert settings.prometheus.retries == 2


@pytest.mark.parametrize(
    ("section", "key_path"),
    [
        ({"url": "prom:9090"}, "prometheus.url"),
        ({"url": "http://p:9090", "retries": 50}, "prometheus.retries"),
        ({"url": "http://p:9090", "max_points_per_query": 20000}, "prometheus.max_points_per_query"),
        ({"url": "http://p:9090", "timeout": "0s"}, "prometheus.timeout"),
        ({"url": "http://p:9090", "token_file": "/x"}, "prometheus.token_file"),
        ({"url": "http://p:9090", "classes": {"gpu-h100": {"query": "sum(x)"}}}, "prometheus.classes.gpu-h100"),
        ({"url": "http://p:9090", "pools": {"h100": {"capacity_query": "x"}}}, "prometheus.pools.h100"),
        ({"url": "http://p:9090", "classes": {"gpu-a100": {"qurey": "sum(x)"}}}, "prometheus.classes.gpu-a100.qurey"),
    ],
)
def test_bad_prometheus_settings_name_their_key(section: dict[str, Any], key_path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, "prometheus": section})
    assert key_path in [p.key_path for p in caught.value.problems]
