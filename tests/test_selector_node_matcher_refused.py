"""A kube-state-metrics class selector whose ``node`` matcher rejects an empty node is refused at load, naming the
key, why and what to select by instead. kube-state-metrics sets a pod's ``node`` label from its ``spec.nodeName``
(empty, so absent, for a pod not yet scheduled): the default query built from ``node=~"gke-ml-a100-.*"``, evaluated by
promtool over a running pod of 8 GPUs on an a100 node, a pending pod of 16 and a running pod of 4 on a t4 node, reads 8
where the a100 work asks 24, the queue the class exists to see dropped. ``node="x"``, ``node=~"gke-.*"`` and
``node!=""`` are refused; a matcher that keeps an empty node (``node!="x"``, ``node!~"gke-ml-t4-.*"``, ``node=~".*"``)
leaves nodes out and keeps the pending pods, so it loads: ``node!~"gke-ml-t4-.*"`` reads the 24 (the namespace alone
reads 28)."""

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
KEEPS_PENDING = 'namespace="research", node!~"gke-ml-t4-.*"'
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
    # a running pod on a t4 node, which the a100 class leaves out with a matcher that keeps the pending pods
    'kube_pod_container_resource_requests{namespace="research", pod="infer-0", uid="u2", container="c",'
    ' node="gke-ml-t4-pool-9z8y-n001", resource="nvidia_com_gpu", unit="integer"}': "4x5",
    'kube_pod_status_phase{namespace="research", pod="infer-0", uid="u2", phase="Running"}': "1x5",
}


def _config(selector: str) -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "research-a100", "series": "research"}],
        "pools": [POOL],
        "prometheus": {"url": "http://p:9090", "classes": {"research-a100": {"selector": selector}}},
    }


@pytest.mark.parametrize(
    "selector",
    [NODE_SELECTOR, 'namespace="research", node!=""', 'node="gke-n1"', 'namespace="research", node!~""',
     'namespace="research", node!~".*", node!="x"', 'namespace="research", node=~".+"'],
)  # fmt: skip
def test_a_node_matcher_is_refused_with_why_and_what_instead(selector: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from_mapping(_config(selector), source="c.yaml")
    [problem] = refused.value.problems
    assert problem.key_path == "prometheus.classes.research-a100.selector"
    assert str(problem).startswith(
        "prometheus.classes.research-a100.selector: kube-state-metrics sets a pod's node label from spec.nodeName, "
        "which a pod not yet scheduled does not have: a node matcher that rejects an empty node drops every pending pod"
    ), str(problem)
    assert "Select pods by namespace, pod or container" in str(problem)
    assert "leave nodes out with a matcher that keeps an empty node" in str(problem)


@pytest.mark.parametrize(
    "selector",
    [KEEPS_PENDING, 'namespace="research", node!="gke-ml-t4-pool-9z8y-n001"', 'namespace="research", node=~".*"',
     'namespace="research", node=~"gke-ml-.*|"', 'namespace="research", node=""'],
)  # fmt: skip
def test_a_node_matcher_that_keeps_an_empty_node_loads(selector: str) -> None:
    settings = settings_from_mapping(_config(selector), source="c.yaml")
    assert settings.prometheus is not None
    assert settings.prometheus.classes["research-a100"].selector == selector


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
        [
            Expect(query(NODE_SELECTOR), [("{}", 8)]),
            Expect(query('namespace="research"'), [("{}", 28)]),
            Expect(query(KEEPS_PENDING), [("{}", 24)]),
        ],
    )
