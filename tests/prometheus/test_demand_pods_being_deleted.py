"""The default kube-state-metrics demand query leaves out pods that are being deleted.

A pod on a node that died stays in phase Running in kube-state-metrics once it is deleted (its kubelet, which would
report it stopped, is gone), with its ``deletionTimestamp`` set, until the Node object is deleted or the pod is
force-deleted; its controller (a Job, a ReplicaSet) has meanwhile created a replacement, which is Pending.
Both ask the same GPUs, and the work needs them once. kube-state-metrics exports ``kube_pod_deletion_timestamp``
(labels ``namespace, pod, uid``; kubernetes/kube-state-metrics docs/metrics/workload/pod-metrics.md, "Unix deletion
timestamp") only for a pod whose deletion timestamp is set (internal/store/pod.go,
``createPodDeletionTimestampFamilyGenerator``), so a pod without the series is counted as before. The series below
are shaped as kube-state-metrics gives them, scraped from two replicas, and read through ``PrometheusSource`` from a
real Prometheus server."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from config.prometheus import PrometheusSettings
from models import DemandClass
from tests.prometheus.server import serving_openmetrics

pytestmark = pytest.mark.xdist_group("prometheus")
T0 = 1_700_000_000
MINUTES = 10
AT = datetime.fromtimestamp(T0 + (MINUTES - 1) * 60, UTC)
DELETED_AT = T0 - 3600  # the pods below were deleted an hour before the window: stuck, not finishing
REPLICAS = ("ksm-0", "ksm-1")
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


@dataclass(frozen=True)
class Pod:
    """One pod object as the kube-state-metrics replicas in ``seen_by`` report it: its phase, its 8-GPU request,
    and its deletion timestamp on the replicas in ``deleted_on`` (a replica a scrape behind has not seen it yet)."""

    name: str
    uid: str
    phase: str
    deleted_on: tuple[str, ...] = ()
    seen_by: tuple[str, ...] = REPLICAS
    gpus: float = 8.0

    def series(self, namespace: str, cluster: str | None) -> dict[str, float]:
        found: dict[str, float] = {}
        scope = f'cluster="{cluster}",' if cluster else ""
        for instance in self.seen_by:
            pod = f'{scope}instance="{instance}",namespace="{namespace}",pod="{self.name}",uid="{self.uid}"'
            gpu = 'container="main",node="",resource="nvidia_com_gpu",unit="integer"'
            found[f"kube_pod_container_resource_requests{{{pod},{gpu}}}"] = self.gpus
            for p in PHASES:
                found[f'kube_pod_status_phase{{{pod},phase="{p}"}}'] = float(p == self.phase)
            if instance in self.deleted_on:
                found[f"kube_pod_deletion_timestamp{{{pod}}}"] = float(DELETED_AT)
        return found


# namespace -> (its pods, GPUs the default query reads); "read N" notes what it read while pods being deleted counted
CASES: dict[str, tuple[tuple[Pod, ...], float]] = {
    # A Job's pod on a node that died: Running with its deletion timestamp set, for as long as the Node object
    # stays; the Job's replacement is Pending. The work needs 8 GPUs (read 16).
    "dead-node": ((Pod("train-a", "u1", "Running", REPLICAS), Pod("train-b", "u2", "Pending")), 8),
    # Graceful termination seen by one replica only (the other a scrape behind): one replica saying so is enough
    # (read 16).
    "graceful": ((Pod("serve-a", "u3", "Running", ("ksm-0",)), Pod("serve-b", "u4", "Pending")), 8),
    # A pending pod held by a finalizer while it is deleted is no demand either, whatever its phase (read 16).
    "pending-deleted": ((Pod("sweep-a", "u5", "Pending", REPLICAS), Pod("sweep-b", "u6", "Running")), 8),
    # Every pod of the namespace is leaving: a real 0 (the namespace is reported), not an unavailable class (read 8).
    "all-leaving": ((Pod("eval-a", "u7", "Running", REPLICAS),), 0),
    # A StatefulSet's pod recreated under its name once the old one is gone: ksm-1, a scrape behind, still reports
    # the old pod object (its uid) being deleted, ksm-0 the new one pending. The deletion is the old object's: the
    # new pod counts (a deletion matched on namespace and pod alone reads 0).
    "same-name": (
        (
            Pod("db-0", "old", "Running", ("ksm-1",), seen_by=("ksm-1",)),
            Pod("db-0", "new", "Pending", seen_by=("ksm-0",)),
        ),
        8,
    ),
    # No pod is being deleted (no kube_pod_deletion_timestamp series at all): every pod counts, as before.
    "untouched": ((Pod("train-c", "u8", "Running"), Pod("train-d", "u9", "Pending")), 16),
}

# One Prometheus view of two clusters: prod's pod runs; staging's pod of the same namespace, name and uid (as a
# cluster restored from another's backup would have it) is being deleted. prod's class must not read staging's.
SCOPED = "scoped"
SCOPED_PODS = {"prod": Pod("train-0", "u10", "Running"), "staging": Pod("train-0", "u10", "Running", REPLICAS)}


def _openmetrics() -> str:
    series: dict[str, float] = {'kube_node_info{instance="ksm-0",node="n1"}': 1.0}
    for namespace, (pods, _) in CASES.items():
        for instance in REPLICAS:
            series[f'kube_namespace_created{{instance="{instance}",namespace="{namespace}"}}'] = 1.5e9
        for pod in pods:
            series |= pod.series(namespace, None)
    for cluster, pod in SCOPED_PODS.items():
        series[f'kube_namespace_created{{cluster="{cluster}",instance="ksm-0",namespace="{SCOPED}"}}'] = 1.5e9
        series |= pod.series(SCOPED, cluster)
    lines: list[str] = []
    for family in sorted({name.split("{")[0] for name in series}):
        lines.append(f"# TYPE {family} gauge\n")
        for name, value in series.items():
            if name.split("{")[0] == family:
                lines.extend(f"{name} {value:g} {T0 + m * 60}\n" for m in range(MINUTES))
    return "".join(lines) + "# EOF\n"


@dataclass(frozen=True)
class Sources:
    unscoped: PrometheusSource
    prod: PrometheusSource
    prod_query: str


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sources]:
    with serving_openmetrics(_openmetrics(), tmp_path_factory.mktemp("prometheus-pods-deleted")) as server:
        settings = PrometheusSettings.model_validate({"url": server.url, "retries": 0})
        queries = demand_queries([DemandClass(name) for name in CASES], settings)
        scoped = PrometheusSettings.model_validate(
            {"url": server.url, "retries": 0, "cluster_selector": 'cluster="prod"'}
        )
        prod_queries = demand_queries([DemandClass(SCOPED)], scoped)
        yield Sources(
            PrometheusSource.from_settings(settings, queries),
            PrometheusSource.from_settings(scoped, prod_queries),
            prod_queries[SCOPED],
        )


@pytest.mark.parametrize("namespace", list(CASES))
def test_pods_being_deleted_are_not_demand(sources: Sources, namespace: str) -> None:
    readings, missing = sources.unscoped.newest_each([DemandClass(namespace)], AT)
    assert not missing
    assert readings[namespace][1] == CASES[namespace][1]


def test_another_clusters_pod_being_deleted_leaves_this_clusters_pod_counted(sources: Sources) -> None:
    readings, missing = sources.prod.newest_each([DemandClass(SCOPED)], AT)
    assert not missing
    assert readings[SCOPED][1] == 8


def test_every_kube_state_metrics_series_read_is_scoped_to_the_cluster(sources: Sources) -> None:
    read = re.findall(r"\b(kube_\w+)(\{[^}]*\})?", sources.prod_query)
    assert "kube_pod_deletion_timestamp" in {metric for metric, _ in read}
    for metric, selector in read:
        assert 'cluster="prod"' in selector, metric
