"""A kube-state-metrics class selector naming ``node`` is refused at load, naming the key, why and what to select
by instead. kube-state-metrics sets a pod's ``node`` label from its ``spec.nodeName`` (empty, so absent, for a pod
not yet scheduled): the default query built from such a selector, evaluated by promtool over one running pod of 8
GPUs and one pending pod of 16, reads 8 where the pods ask 24, the queue the class exists to see dropped. Every
``node`` matcher is refused, whatever its operator: one on an empty node reads the pending pods alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.sources.prometheus_queries import demand_queries
from config import settings_from_mapping
from config.prometheus import PrometheusSettings
from models import ConfigError, DemandClass
from tests.prometheus.promql_cases import Expect, assert_answers

POOL = {"id": "a100", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
        "lead_time": "10m", "serves": ["research-a100"]}  # fmt: skip
NODE_SELECTOR = 'namespace="research", node=~"gke-ml-a100-.*"'
# kube-state-metrics' series (labels as docs/metrics/workload/pod-metrics.md gives them) of a running pod on an a100
# node and a pending pod, whose empty node label Prometheus does not store.
PODS = {
    'kube_pod_container_resource_requests{namespace="research", pod="train-0", uid="u0", container="c",'
    ' node="gke-ml-a100-pool-1a2b-n001", resource="nvidia_com_gpu", unit="integer"}': "8x5",
    'kube_pod_container_resource_requests{namespace="research", pod="train-1", uid="u1", container="c",'
    ' resource="nvidia_com_gpu", unit="integer"}': "16x5",
    'kube_pod_status_phase{namespace="research", pod="train-0", uid="u0", phase="Running"}': "1x5",
    'kube_pod_status_phase{namespace="research", pod="train-1", uid="u1", phase="Pending"}': "1x5",
    'kube_namespace_created{namespace="research"}': "1x5",
}


def _config(selector: str) -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "research-a100", "series": "research"}],
        "pools": [POOL],
        "prometheus": {"url": "http://p:9090", "classes": {"research-a100": {"selector": selector}}},
    }


@pytest.mark.parametrize("selector", [NODE_SELECTOR, 'namespace="research", node!=""', 'node="gke-n1"'])
def test_a_node_matcher_is_refused_with_why_and_what_instead(selector: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from_mapping(_config(selector), source="c.yaml")
    [problem] = refused.value.problems
    assert problem.key_path == "prometheus.classes.research-a100.selector"
    assert str(problem).startswith(
        "prometheus.classes.research-a100.selector: kube-state-metrics sets a pod's node label from spec.nodeName, "
        "which a pod not yet scheduled does not have: a node matcher drops every pending pod"
    ), str(problem)
    assert "Select pods by namespace, pod or container" in str(problem)


def test_the_same_selector_loads_under_kueue_where_it_is_not_read_as_pods() -> None:
    config = _config('cluster_queue="research", node="x"')
    config["prometheus"]["demand_metrics"] = "kueue"
    assert settings_from_mapping(config).prometheus is not None


def test_what_a_node_matcher_read_running_work_alone(tmp_path: Path) -> None:
    def query(selector: str) -> str:
        settings = PrometheusSettings.model_validate(_config(selector)["prometheus"])
        return demand_queries([DemandClass("research-a100", series="research")], settings)["research-a100"]

    assert_answers(
        tmp_path,
        PODS,
        [Expect(query(NODE_SELECTOR), [("{}", 8)]), Expect(query('namespace="research"'), [("{}", 24)])],
    )
