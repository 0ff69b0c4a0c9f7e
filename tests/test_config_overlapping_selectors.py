"""Two demand classes of one family and resource whose default queries both read a namespace (Kueue: a
ClusterQueue) are refused at load, naming both classes and the namespace: README's own example selector,
``namespace=~"research|research-batch"``, beside a class of research-batch read research-batch's pods twice, and
promtool evaluating the two queries over 8 GPUs in research and 16 in research-batch answers 24 and 16, a pool
sized on 40 GPUs for 24 asked. Only namespaces named literally (``=``, or an alternative of a top-level
alternation) are compared, and only when the rest of one class's matchers is among the other's; a regex that is
not such an alternation is not guessed at. Under Kueue, ``flavor`` and ``cohort`` matchers are not among the rest:
the pending gauge carries neither, so two classes split by flavor over one ClusterQueue each read its whole queue
(promtool: 16 and 16 for 16 GPUs queued) and are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.sources.prometheus_queries import demand_queries
from config import settings_from_mapping
from config.schema import Settings
from models import ConfigError
from tests.prometheus.promql_cases import Expect, assert_answers

POOL = {"kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
        "lead_time": "10m"}  # fmt: skip
README_SELECTOR = 'namespace=~"research|research-batch"'
# kube-state-metrics' series (docs/metrics/workload/pod-metrics.md) of a running pod in each namespace.
PODS = {
    **{
        f'kube_pod_container_resource_requests{{namespace="{ns}", pod="{pod}", uid="{pod}", container="c", '
        f'node="n1", resource="nvidia_com_gpu", unit="integer"}}': f"{gpus}x5"
        for ns, pod, gpus in (("research", "train-0", 8), ("research-batch", "sweep-0", 16))
    },
    'kube_pod_status_phase{namespace="research", pod="train-0", uid="train-0", phase="Running"}': "1x5",
    'kube_pod_status_phase{namespace="research-batch", pod="sweep-0", uid="sweep-0", phase="Running"}': "1x5",
    'kube_namespace_created{namespace="research"}': "1x5",
    'kube_namespace_created{namespace="research-batch"}': "1x5",
}


def _config(classes: dict[str, dict[str, Any]], **prometheus: Any) -> dict[str, Any]:
    """Classes research-a100 (series research) and batch-a100 (series research-batch) on one pool, with the
    given per-class query settings."""
    demand = [{"name": "research-a100", "series": "research"}, {"name": "batch-a100", "series": "research-batch"}]
    return {
        "demand_classes": demand,
        "pools": [{**POOL, "id": "a100", "serves": ["research-a100", "batch-a100"]}],
        "prometheus": {"url": "http://p:9090", "classes": classes, **prometheus},
    }


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        settings_from_mapping(raw, source="c.yaml")
    return [str(p) for p in refused.value.problems]


def test_readmes_alternation_beside_a_class_of_one_of_its_namespaces_is_refused(tmp_path: Path) -> None:
    raw = _config({"research-a100": {"selector": README_SELECTOR}})
    assert _problems(raw) == [
        "prometheus.classes.research-a100.selector: demand classes 'research-a100' and 'batch-a100' both read the "
        "nvidia.com/gpu demand of namespace 'research-batch': it would be counted twice and their pools sized on "
        "double; leave it out of one class's selector"
    ]
    settings = Settings.model_validate(raw)  # what the agent would have read, before the rules across sections
    assert settings.prometheus is not None
    queries = demand_queries(settings.demand_class_models(), settings.prometheus)
    assert_answers(
        tmp_path,
        PODS,
        [Expect(queries["research-a100"], [("{}", 24)]), Expect(queries["batch-a100"], [("{}", 16)])],
    )


@pytest.mark.parametrize(
    ("classes", "prometheus", "key", "shared"),
    [
        (
            {"research-a100": {"selector": 'namespace=~"research|x"'}, "batch-a100": {"selector": README_SELECTOR}},
            {},
            "batch-a100",
            "namespace 'research'",
        ),
        (
            {"research-a100": {"selector": 'namespace=~"team-.*|research-batch", container="c"'},
             "batch-a100": {"selector": 'namespace="research-batch", container="c", pod=~"sweep-.*"'}},
            {},
            "batch-a100",
            "namespace 'research-batch'",
        ),
        (
            {"research-a100": {"selector": 'cluster_queue=~"research|research-batch", flavor="a100"'}},
            {"demand_metrics": "kueue"},
            "research-a100",
            "ClusterQueue 'research-batch'",
        ),
    ],
)  # fmt: skip
def test_overlapping_literal_namespaces_are_refused_naming_both_classes(
    classes: dict[str, Any], prometheus: dict[str, Any], key: str, shared: str
) -> None:
    (problem,) = _problems(_config(classes, **prometheus))
    assert problem.startswith(
        f"prometheus.classes.{key}.selector: demand classes 'research-a100' and 'batch-a100' both read the "
        f"nvidia.com/gpu demand of {shared}: it would be counted twice"
    ), problem


@pytest.mark.parametrize(
    "classes",
    [
        {"research-a100": {"selector": 'namespace=~"research.*"'}},  # not an alternation: not guessed at
        {"research-a100": {"selector": 'namespace=~"research|research-b.*"'}},  # research-b.* not literal
        {"research-a100": {"selector": 'namespace=~"(?i)research|research-batch"'}},
        {"research-a100": {"selector": README_SELECTOR + ', container="trainer"'},
         "batch-a100": {"selector": 'namespace="research-batch", container="sweeper"'}},  # disjoint pods
        {"research-a100": {"selector": README_SELECTOR, "resource": "nvidia.com/mig-1g.5gb"}},
        {"research-a100": {"query": 'sum(kube_pod_container_resource_requests{namespace=~"research|research-batch"})'}},
    ],
)  # fmt: skip
def test_selectors_not_shown_to_overlap_load(classes: dict[str, Any]) -> None:
    settings = settings_from_mapping(_config(classes))
    assert [c.name for c in settings.demand_classes] == ["research-a100", "batch-a100"]


def test_classes_of_different_families_may_name_one_namespace() -> None:
    raw = _config({"research-a100": {"selector": README_SELECTOR}})
    raw["demand_classes"][1]["family"] = "tpu"
    raw["pools"] = [
        {**POOL, "id": "a100", "serves": ["research-a100"]},
        {**POOL, "id": "v5e", "kind": "tpu-slice-group", "family": "tpu", "serves": ["batch-a100"]},
    ]
    assert settings_from_mapping(raw).prometheus is not None


# Kueue's gauges (kubernetes-sigs/kueue pkg/metrics/metrics.go) of ClusterQueue research, in no cohort: 16 GPUs
# pending, a gauge without flavor, and nothing yet reserved on either flavor.
KUEUE = {
    **{
        f'kueue_cluster_queue_{gauge}{{cluster_queue="research", flavor="{flavor}", resource="nvidia.com/gpu"}}': values
        for flavor in ("a100", "h100")
        for gauge, values in (("resource_reservation", "0x5"), ("nominal_quota", "16x5"))
    },
    'kueue_cluster_queue_resource_pending{cluster_queue="research", resource="nvidia.com/gpu"}': "16x5",
    'kueue_cluster_queue_status{cluster_queue="research", status="active"}': "1x5",
}
FLAVOR_SPLIT = {
    "research-a100": {"selector": 'cluster_queue="research", flavor="a100"'},
    "batch-a100": {"selector": 'cluster_queue="research", flavor="h100"'},
}


@pytest.mark.parametrize(
    "classes",
    [
        FLAVOR_SPLIT,
        {"research-a100": {"selector": 'cluster_queue="research", cohort="ml"'},
         "batch-a100": {"selector": 'cluster_queue="research", flavor="h100"'}},
        {"batch-a100": {"selector": 'cluster_queue="research", flavor="h100"'}},
    ],
)  # fmt: skip
def test_kueue_classes_split_by_flavor_or_cohort_over_one_cluster_queue_are_refused(
    classes: dict[str, Any],
) -> None:
    (problem,) = _problems(_config(classes, demand_metrics="kueue"))
    assert problem == (
        "prometheus.classes.batch-a100.selector: demand classes 'research-a100' and 'batch-a100' both read the "
        "nvidia.com/gpu demand of ClusterQueue 'research': it would be counted twice and their pools sized on double; "
        "leave it out of one class's selector (flavor and cohort matchers do not split it: each class counts all the "
        "work queued in the ClusterQueue, whose pending gauge carries neither; give each class a ClusterQueue of its "
        "own)"
    )


def test_what_a_flavor_split_read_the_queue_in_each_class(tmp_path: Path) -> None:
    settings = Settings.model_validate(_config(FLAVOR_SPLIT, demand_metrics="kueue"))  # before the rules across
    assert settings.prometheus is not None
    queries = demand_queries(settings.demand_class_models(), settings.prometheus)
    # 16 GPUs queued, nothing reserved: the two classes read 32 between them.
    assert_answers(
        tmp_path,
        KUEUE,
        [Expect(queries["research-a100"], [("{}", 16)]), Expect(queries["batch-a100"], [("{}", 16)])],
    )


def test_kueue_classes_with_a_cluster_queue_each_may_name_flavors() -> None:
    classes = {
        "research-a100": {"selector": 'cluster_queue="research", flavor="a100"'},
        "batch-a100": {"selector": 'cluster_queue="research-batch", flavor="a100", cohort="ml"'},
    }
    settings = settings_from_mapping(_config(classes, demand_metrics="kueue"))
    assert settings.prometheus is not None and settings.prometheus.demand_metrics == "kueue"
