"""``prometheus.cluster_selector``: in one Prometheus view of several clusters (Google Managed Prometheus, Thanos,
Mimir), the default queries read this cluster's series only, every metric of them: the pod requests, the pod
phases they are joined with, the namespace or node check that lets "no pods" read as 0, the Kueue gauges, and the
resource check. Each query is evaluated by promtool over the series two clusters, ``prod`` and ``staging``, would
give (kube-state-metrics and Kueue label sets as in tests/prometheus/server.py, plus the ``cluster`` label the view
adds); the agent runs in ``prod``."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.sources.prometheus_queries import demand_query
from agent.sources.resource_check import known_resources_query, seen_query
from config import settings_from_mapping
from config.prometheus import PrometheusSettings
from models import ConfigError, DemandClass
from tests.prometheus.promql_cases import Expect, assert_answers

ML = DemandClass("ml")
PROD = 'cluster="prod"'


def _settings(**values: Any) -> PrometheusSettings:
    return PrometheusSettings.model_validate({"url": "http://prometheus:9090", **values})


def _pod(cluster: str, pod: str, gpus: int, phase: str) -> dict[str, str]:
    requests = (
        f'kube_pod_container_resource_requests{{cluster="{cluster}",namespace="ml",pod="{pod}",container="main",'
        'resource="nvidia_com_gpu",unit="integer"}'
    )
    phases = {
        f'kube_pod_status_phase{{cluster="{cluster}",namespace="ml",pod="{pod}",phase="{p}"}}': "1x5"
        if p == phase
        else "0x5"
        for p in ("Pending", "Running", "Succeeded", "Failed", "Unknown")
    }
    return {requests: f"{gpus}x5", **phases}


def _namespace(cluster: str) -> dict[str, str]:
    return {
        f'kube_namespace_created{{cluster="{cluster}",namespace="ml"}}': "1.5e9x5",
        f'kube_node_info{{cluster="{cluster}",node="{cluster}-n1"}}': "1x5",
    }


def test_kube_state_metrics_counts_this_clusters_pods_only(tmp_path: Path) -> None:
    # prod runs 8 GPUs in namespace ml; staging has 16 GPUs pending in its own namespace ml
    series = {**_pod("prod", "train-abc", 8, "Running"), **_namespace("prod")}
    series |= {**_pod("staging", "train-xyz", 16, "Pending"), **_namespace("staging")}
    assert_answers(
        tmp_path,
        series,
        [
            Expect(demand_query(ML, _settings(cluster_selector=PROD)), [("{}", 8)]),
            Expect(demand_query(ML, _settings()), [("{}", 24)]),  # unscoped, both clusters count
        ],
    )


def test_a_pod_is_joined_with_its_own_clusters_phase(tmp_path: Path) -> None:
    # The same StatefulSet pod in both clusters: prod's has finished, staging's runs. Only prod's phase counts.
    series = {**_pod("prod", "train-0", 8, "Succeeded"), **_namespace("prod")}
    series |= {**_pod("staging", "train-0", 8, "Running"), **_namespace("staging")}
    with_class_selector = {"ml": {"selector": f'namespace="ml", {PROD}'}}
    assert_answers(
        tmp_path,
        series,
        [
            Expect(demand_query(ML, _settings(cluster_selector=PROD)), [("{}", 0)]),
            Expect(demand_query(ML, _settings(cluster_selector=PROD, classes=with_class_selector)), [("{}", 0)]),
            # the cluster named in the class's selector alone leaves the phases of every cluster in the join
            Expect(demand_query(ML, _settings(classes=with_class_selector)), [("{}", 8)]),
        ],
    )


@pytest.mark.parametrize("selector", [None, 'namespace="ml", cluster="prod"', 'pod=~"train-.*"'])
def test_another_clusters_exporter_cannot_stand_in_for_a_missing_one(tmp_path: Path, selector: str | None) -> None:
    # prod's kube-state-metrics is down (no prod series at all); staging's reports its empty namespace ml and a node
    classes = {"ml": {"selector": selector}} if selector else {}
    query = demand_query(ML, _settings(cluster_selector=PROD, classes=classes))
    assert_answers(tmp_path, _namespace("staging"), [Expect(query)])  # unavailable, not 0


def test_no_pods_still_read_as_zero_while_this_clusters_exporter_is_up(tmp_path: Path) -> None:
    series = {**_namespace("prod"), **_pod("staging", "train-xyz", 16, "Running"), **_namespace("staging")}
    for selector in (None, 'pod=~"train-.*"'):
        classes = {"ml": {"selector": selector}} if selector else {}
        query = demand_query(ML, _settings(cluster_selector=PROD, classes=classes))
        assert_answers(tmp_path, series, [Expect(query, [("{}", 0)])])


def test_kueue_reads_this_clusters_cluster_queue_only(tmp_path: Path) -> None:
    # Both ClusterQueues in a cohort without a borrowing limit (reported as +Inf), so all their pending work counts.
    series: dict[str, str] = {}
    for cluster, reserved, pending in (("prod", 8, 0), ("staging", 32, 16)):
        labels = f'cluster="{cluster}",cluster_queue="ml",resource="nvidia.com/gpu",replica_role="leader"'
        series[f'kueue_cluster_queue_resource_reservation{{{labels},cohort="c",flavor="a100"}}'] = f"{reserved}x5"
        series[f"kueue_cluster_queue_resource_pending{{{labels}}}"] = f"{pending}x5"
        series[f'kueue_cluster_queue_nominal_quota{{{labels},cohort="c",flavor="a100"}}'] = "16x5"
        series[f'kueue_cluster_queue_borrowing_limit{{{labels},cohort="c",flavor="a100"}}'] = " ".join(["Inf"] * 6)
        status = f'cluster="{cluster}",cluster_queue="ml",status="active",replica_role="leader"'
        series[f"kueue_cluster_queue_status{{{status}}}"] = "1x5"
    assert_answers(
        tmp_path,
        series,
        [
            Expect(demand_query(ML, _settings(demand_metrics="kueue", cluster_selector=PROD)), [("{}", 8)]),
            Expect(demand_query(ML, _settings(demand_metrics="kueue")), [("{}", 48)]),  # staging's, the larger
        ],
    )


def test_the_resource_check_looks_in_this_cluster(tmp_path: Path) -> None:
    # staging's nodes offer and its pods request nvidia_com_gpu; prod's nodes offer only CPUs, and no prod pod ever
    # asked for the resource: in prod, a class counting it is counting a resource nobody there has
    series = {
        'kube_node_status_capacity{cluster="staging",node="s1",resource="nvidia_com_gpu",unit="integer"}': "8x5",
        'kube_node_status_capacity{cluster="prod",node="p1",resource="cpu",unit="core"}': "96x5",
        **_pod("staging", "train-xyz", 8, "Running"),
    }
    day = timedelta(days=1)
    assert_answers(
        tmp_path,
        series,
        [
            Expect(seen_query("nvidia_com_gpu", day, [PROD])),
            Expect(seen_query("nvidia_com_gpu", day), [("{}", 1)]),
            Expect(known_resources_query(day, [PROD]), [('{resource="cpu"}', 1)]),
        ],
    )


def test_the_default_queries_are_unchanged_without_a_cluster_selector() -> None:
    assert "cluster" not in demand_query(ML, _settings())
    assert "cluster=" not in demand_query(ML, _settings(demand_metrics="kueue"))
    assert "cluster" not in known_resources_query(timedelta(days=1))


BASE: dict[str, Any] = {
    "demand_classes": [{"name": "ml"}],
    "pools": [
        {
            "id": "a100",
            "kind": "gpu-node-pool",
            "chips_per_unit": 8,
            "max_units": 4,
            "price_per_chip_hour_usd": 3.0,
            "lead_time": "10m",
            "serves": ["ml"],
        }
    ],
}


@pytest.mark.parametrize(
    ("selector", "reason"),
    [
        ("cluster=prod", "not a list of PromQL label matchers"),
        ("  ", "not a list of PromQL label matchers"),
        ('cluster="prod", namespace="ml"', "read the label(s) namespace themselves"),
        ('cluster_queue="ml"', "read the label(s) cluster_queue themselves"),
    ],
)
def test_a_cluster_selector_that_is_not_one_is_refused_naming_the_key(selector: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, "prometheus": {"url": "http://p:9090", "cluster_selector": selector}})
    [problem] = caught.value.problems
    assert problem.key_path == "prometheus.cluster_selector"
    assert reason in str(problem), str(problem)


def test_a_cluster_selector_is_accepted() -> None:
    selector = 'cluster="prod", location="europe-west4", project_id=~"ml-.*"'
    settings = settings_from_mapping({**BASE, "prometheus": {"url": "http://p:9090", "cluster_selector": selector}})
    assert settings.prometheus is not None and settings.prometheus.cluster_selector == selector
