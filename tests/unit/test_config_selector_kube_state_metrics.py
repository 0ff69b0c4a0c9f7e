"""A demand class's ``selector`` under ``demand_metrics: kube-state-metrics`` that names a label of Kueue's
ClusterQueue gauges (``cluster_queue``, ``flavor``, ``cohort``) is refused at load, naming the key: no pod's
requests carry those labels, so the default query found no pods and its fallback (``kube_node_info``, the
selector naming no namespace) read the class as 0 while its jobs waited. Under ``kueue`` the same selector is
read as before, and a kube-state-metrics selector on the pods' own labels loads."""

from __future__ import annotations

from typing import Any

import pytest

from config import settings_from_mapping
from models import ConfigError

POOL = {"id": "a100", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
        "lead_time": "10m", "serves": ["gpu-a100"]}  # fmt: skip


def _config(selector: str, **prometheus: Any) -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "gpu-a100"}],
        "pools": [POOL],
        "prometheus": {"url": "http://p:9090", "classes": {"gpu-a100": {"selector": selector}}, **prometheus},
    }


@pytest.mark.parametrize(
    ("selector", "labels"),
    [
        ('cluster_queue="research", flavor="a100"', "cluster_queue, flavor are labels"),
        ('namespace="research", cohort="ml"', "cohort is a label"),
        ("flavor=~'a100|h100'", "flavor is a label"),
    ],
)
@pytest.mark.parametrize("metrics", [{}, {"demand_metrics": "kube-state-metrics"}], ids=["default", "explicit"])
def test_a_kube_state_metrics_selector_on_kueue_labels_is_refused(
    selector: str, labels: str, metrics: dict[str, str]
) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from_mapping(_config(selector, **metrics), source="c.yaml")
    [problem] = refused.value.problems
    assert problem.key_path == "prometheus.classes.gpu-a100.selector"
    assert str(problem).startswith(
        f"prometheus.classes.gpu-a100.selector: {labels} of Kueue's ClusterQueue gauges, which "
        "kube_pod_container_resource_requests never carries: with demand_metrics: kube-state-metrics the class "
        "would read 0 while its jobs wait"
    ), str(problem)
    assert "demand_metrics: kueue" in str(problem)


@pytest.mark.parametrize(
    "selector", ['namespace=~"research|research-batch"', 'namespace="research", container="trainer"', 'pod=~"t-.*"']
)
def test_a_kube_state_metrics_selector_on_the_pods_labels_loads(selector: str) -> None:
    settings = settings_from_mapping(_config(selector))
    assert settings.prometheus is not None
    assert settings.prometheus.classes["gpu-a100"].selector == selector


def test_the_same_selector_loads_under_kueue_and_with_a_query_of_its_own() -> None:
    kueue_selector = 'cluster_queue="research", flavor="a100"'
    assert settings_from_mapping(_config(kueue_selector, demand_metrics="kueue")).prometheus is not None
    written = _config(kueue_selector)
    written["prometheus"]["classes"]["gpu-a100"]["query"] = "sum(my_gpu_demand)"  # the selector is not read
    assert settings_from_mapping(written).prometheus is not None
