"""The default queries per exporter and their overrides, and the ``prometheus`` configuration section."""

from __future__ import annotations

import re
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
        (
            GPU,
            "kube-state-metrics",
            ['resource="nvidia_com_gpu"', 'namespace="team-a"', 'count(kube_namespace_created{namespace="team-a"})'],
        ),
        (TPU, "kube-state-metrics", ['resource="google_com_tpu"', 'namespace="tpu-v5e"', 'phase=~"Pending|Running"']),
        (
            GPU,
            "kueue",
            ['resource="nvidia.com/gpu"', 'cluster_queue="team-a"', "kueue_cluster_queue_resource_pending{"],
        ),
        (
            TPU,
            "kueue",
            ['resource="google.com/tpu"', 'cluster_queue="tpu-v5e"', "kueue_cluster_queue_resource_reservation"],
        ),
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


@pytest.mark.parametrize(
    ("selector", "known"),
    [
        ('namespace=~"team-.*", container="main"', 'count(kube_namespace_created{namespace=~"team-.*"})'),
        ('namespace="a", namespace!="b"', 'count(kube_namespace_created{namespace="a", namespace!="b"})'),
        ('pod=~"trainer-.*"', "count(kube_node_info)"),  # no namespace named: any node will do
    ],
)
def test_kube_state_metrics_reads_no_pods_as_zero_only_while_it_reports_the_namespaces(
    selector: str, known: str
) -> None:
    query = demand_query(GPU, _settings(classes={"gpu-a100": {"selector": selector}}))
    assert f" or on() (0 * {known}))" in query
    assert f'kube_pod_container_resource_requests{{resource="nvidia_com_gpu", {selector}}}' in query


def _gauges(query: str) -> dict[str, list[str]]:
    """Per metric the query reads, the selector of each time it reads it."""
    found: dict[str, list[str]] = {}
    for metric, selector in re.findall(r"(kueue_\w+)\{([^}]*)\}", query):
        found.setdefault(metric, []).append(selector)
    return found


def test_kueue_flavor_and_cohort_narrow_usage_only_and_pending_is_never_defaulted_to_zero() -> None:
    # kueue_cluster_queue_resource_pending carries cluster_queue, resource and replica_role only (no flavor, no
    # cohort): a flavor matcher on it would match nothing.
    selector = 'cluster_queue="research", flavor="a100", cohort="ml", custom_team="vision"'
    gauges = _gauges(demand_query(GPU, _settings(demand_metrics="kueue", classes={"gpu-a100": {"selector": selector}})))
    for metric in ("kueue_cluster_queue_resource_reservation", "kueue_cluster_queue_nominal_quota"):
        for usage in gauges[metric]:
            for part in ('cluster_queue="research"', 'flavor="a100"', 'cohort="ml"', 'custom_team="vision"'):
                assert part in usage
    for usage in gauges["kueue_cluster_queue_resource_reservation"]:
        assert 'replica_role!="follower"' in usage
    for pending in gauges["kueue_cluster_queue_resource_pending"]:
        for part in (
            'cluster_queue="research"',
            'custom_team="vision"',
            'resource="nvidia.com/gpu"',
            'replica_role!="follower"',
        ):
            assert part in pending
        assert "flavor" not in pending and "cohort" not in pending
    assert "vector(0)" not in str(gauges)  # a missing pending gauge leaves the answer empty


def test_a_replica_role_matcher_in_the_selector_replaces_the_default_one() -> None:
    classes = {"gpu-a100": {"selector": 'cluster_queue="research", replica_role="leader"'}}
    query = demand_query(GPU, _settings(demand_metrics="kueue", classes=classes))
    gauges = _gauges(query)
    for metric in ("kueue_cluster_queue_resource_reservation", "kueue_cluster_queue_resource_pending"):
        assert all('replica_role="leader"' in selector for selector in gauges[metric])
    assert "follower" not in query


def test_duplicate_exporters_are_read_once() -> None:
    kueue = demand_query(GPU, _settings(demand_metrics="kueue"))
    assert "max by (cluster_queue, flavor, resource) (kueue_cluster_queue_resource_reservation{" in kueue
    assert "max by (cluster_queue, resource) (kueue_cluster_queue_resource_pending{" in kueue
    ksm = demand_query(GPU, _settings())
    assert "max by (namespace, pod, container, resource) (kube_pod_container_resource_requests{" in ksm


@pytest.mark.parametrize(
    ("resource", "expected"),
    [("google.com/tpu", "google_com_tpu"), ("nvidia.com/gpu", "nvidia_com_gpu"), ("nvidia_com_gpu", "nvidia_com_gpu")],
)
def test_kube_state_metrics_reads_resource_names_as_it_sanitizes_them(resource: str, expected: str) -> None:
    query = demand_query(TPU, _settings(classes={"tpu-v5e": {"resource": resource}}))
    assert f'resource="{expected}"' in query
    assert "/" not in query.split("resource=")[1].split(",")[0]


def test_kueue_keeps_the_kubernetes_resource_name() -> None:
    query = demand_query(TPU, _settings(demand_metrics="kueue", classes={"tpu-v5e": {"resource": "google.com/tpu"}}))
    for metric, selectors in _gauges(query).items():
        if metric != "kueue_cluster_queue_status":  # per cluster_queue and status only
            assert all('resource="google.com/tpu"' in selector for selector in selectors), metric
    assert "google_com_tpu" not in query


@pytest.mark.parametrize(
    ("selector", "reason"),
    [
        ('flavor="a100"', "cluster_queue matcher"),
        ('cohort="ml", flavor="a100"', "cluster_queue matcher"),
        ('cluster_queue="a" flavor="b"', "not a list of PromQL label matchers"),
        ("cluster_queue=research", "not a list of PromQL label matchers"),
    ],
)
def test_kueue_selectors_the_pending_term_cannot_follow_are_refused(selector: str, reason: str) -> None:
    config = {
        **BASE,
        "prometheus": {
            "url": "http://p:9090",
            "demand_metrics": "kueue",
            "classes": {"gpu-a100": {"selector": selector}},
        },
    }
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping(config)
    [problem] = caught.value.problems
    assert problem.key_path == "prometheus.classes.gpu-a100.selector"
    assert reason in str(problem)


@pytest.mark.parametrize(
    "selector",
    ['cluster_queue="research", flavor="a100"', "cluster_queue=~'a|b',flavor!=\"x, y\",", "cluster_queue=`q`"],
)
def test_kueue_selectors_with_a_cluster_queue_are_accepted(selector: str) -> None:
    config = {
        **BASE,
        "prometheus": {
            "url": "http://p:9090",
            "demand_metrics": "kueue",
            "classes": {"gpu-a100": {"selector": selector}},
        },
    }
    settings = settings_from_mapping(config)
    assert settings.prometheus is not None


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
