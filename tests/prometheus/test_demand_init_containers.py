"""The default kube-state-metrics demand query counts a pod's init containers as the scheduler does, never below.

Kubernetes ("Resource Management for Pods and Containers", "Init Containers", "Sidecar Containers"): a pod's
effective request is the larger of its highest init container request and the sum of its app containers' requests,
a sidecar (an init container with ``restartPolicy: Always``) adding to both. kube-state-metrics gives init
containers' requests in ``kube_pod_init_container_resource_requests`` and their restart policy only in
``kube_pod_init_container_info``, a series that exists once the kubelet reports the container's status (so not for a
pod still waiting to be scheduled). An init container is a sidecar only when a replica's series says
``restart_policy="Always"``, run-once otherwise; see tests/fakes/REFERENCE.md. The series below are shaped as
kube-state-metrics gives them, scraped from two replicas, and read through ``PrometheusSource`` from a real
Prometheus server."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from config.prometheus import PrometheusSettings
from models import DemandClass
from tests.prometheus.server import PrometheusServer, serving_openmetrics

pytestmark = pytest.mark.xdist_group("prometheus")
T0 = 1_700_000_000
MINUTES = 10
AT = datetime.fromtimestamp(T0 + (MINUTES - 1) * 60, UTC)
REPLICAS = ("ksm-0", "ksm-1")
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
SIDECAR, RUN_ONCE, NOT_STARTED = "Always", "", None  # restart_policy of kube_pod_init_container_info, or no series


class Pod:
    """One pod's kube-state-metrics series: its app and init containers' GPU requests, its phase, and the info
    series of each init container that has a status (its ``restart_policy`` label empty when not a sidecar)."""

    def __init__(
        self,
        namespace: str,
        phase: str,
        app: tuple[float, ...],
        init: tuple[tuple[float, str | None], ...] = (),
        unlabelled_on: tuple[str, ...] = (),
    ) -> None:
        self.namespace, self.phase, self.app, self.init = namespace, phase, app, init
        self.unlabelled_on = unlabelled_on  # replicas older than the restart_policy label (kube-state-metrics#2240)

    def series(self, instance: str) -> dict[str, float]:
        pod = f'instance="{instance}",namespace="{self.namespace}",pod="{self.namespace}-0",uid="u-{self.namespace}"'
        gpu = 'node="",resource="nvidia_com_gpu",unit="integer"'
        found = {f'kube_namespace_created{{instance="{instance}",namespace="{self.namespace}"}}': 1.5e9}
        for p in PHASES:
            found[f'kube_pod_status_phase{{{pod},phase="{p}"}}'] = float(p == self.phase)
        for i, gpus in enumerate(self.app):
            found[f'kube_pod_container_resource_requests{{{pod},container="main-{i}",{gpu}}}'] = gpus
        for i, (gpus, restart_policy) in enumerate(self.init):
            container = f'container="init-{i}"'
            found[f"kube_pod_init_container_resource_requests{{{pod},{container},{gpu}}}"] = gpus
            if restart_policy is not None:  # an empty label is no label in Prometheus
                labelled = restart_policy and instance not in self.unlabelled_on
                policy = f',restart_policy="{restart_policy}"' if labelled else ""
                image = 'image_spec="img",image="img",image_id="",container_id=""'
                found[f"kube_pod_init_container_info{{{pod},{container},{image}{policy}}}"] = 1.0
        return found


# namespace -> (pod, GPUs the default query reads for it)
CASES: dict[str, tuple[Pod, float]] = {
    # A started pod whose run-once init container asks more GPUs than its app containers: the scheduler reserves 8.
    "check-first": (Pod("check-first", "Running", (4,), ((8, RUN_ONCE),)), 8),
    # Initializing (Pending, scheduled): the same while its init container runs.
    "initializing": (Pod("initializing", "Pending", (2, 2), ((6, RUN_ONCE),)), 6),
    # A run-once init container asking less than the app containers adds nothing.
    "small-init": (Pod("small-init", "Running", (4,), ((2, RUN_ONCE),)), 4),
    # A sidecar keeps running beside the app containers: 4 + 1.
    "sidecar": (Pod("sidecar", "Running", (4,), ((1, SIDECAR),)), 5),
    # A sidecar and a run-once init container: 1 + max(4, 6).
    "both": (Pod("both", "Running", (4,), ((1, SIDECAR), (6, RUN_ONCE))), 7),
    # Not scheduled yet: no init container has a status, so its kind is unknown; it is taken for a run-once one
    # (Kubernetes' default), as the scheduler reserves max(8, 4) for it.
    "unscheduled": (Pod("unscheduled", "Pending", (4,), ((8, NOT_STARTED),)), 8),
    # A GPU health check asking the GPUs of the app container, the pod waiting to be scheduled: 8, not 16.
    "gpu-check": (Pod("gpu-check", "Pending", (8,), ((8, NOT_STARTED),)), 8),
    # The same pod scheduled and initializing.
    "gpu-check-started": (Pod("gpu-check-started", "Pending", (8,), ((8, RUN_ONCE),)), 8),
    # What the rule misses: a sidecar of a pod not scheduled yet is taken for a run-once container until its
    # status is reported (4 where the scheduler will reserve 5); README says so.
    "pending-sidecar": (Pod("pending-sidecar", "Pending", (4,), ((1, NOT_STARTED),)), 4),
    # A kube-state-metrics rolling upgrade: ksm-1, older than the restart_policy label, writes the sidecar's info
    # series without it; ksm-0 says Always, and any replica saying so wins: 4 + 1.
    "rollout": (Pod("rollout", "Running", (4,), ((1, SIDECAR),), unlabelled_on=("ksm-1",)), 5),
    # Only an init container asks for GPUs.
    "init-only": (Pod("init-only", "Running", (), ((8, RUN_ONCE),)), 8),
    # No init container: the app containers' sum, as before.
    "app-only": (Pod("app-only", "Running", (4, 4)), 8),
}


def _openmetrics() -> str:
    series: dict[str, float] = {'kube_node_info{instance="ksm-0",node="n1"}': 1.0}
    for pod, _ in CASES.values():
        for instance in REPLICAS:
            series |= pod.series(instance)
    lines: list[str] = []
    for family in sorted({name.split("{")[0] for name in series}):
        lines.append(f"# TYPE {family} gauge\n")
        for name, value in series.items():
            if name.split("{")[0] == family:
                lines.extend(f"{name} {value:g} {T0 + m * 60}\n" for m in range(MINUTES))
    return "".join(lines) + "# EOF\n"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusSource]:
    server: PrometheusServer
    with serving_openmetrics(_openmetrics(), tmp_path_factory.mktemp("prometheus-init-containers")) as server:
        settings = PrometheusSettings.model_validate({"url": server.url, "retries": 0})
        queries = demand_queries([DemandClass(name) for name in CASES], settings)
        yield PrometheusSource.from_settings(settings, queries)


@pytest.mark.parametrize("namespace", list(CASES))
def test_a_pods_init_containers_count_as_the_scheduler_reserves_them(source: PrometheusSource, namespace: str) -> None:
    readings, missing = source.newest_each([DemandClass(namespace)], AT)
    assert not missing
    assert readings[namespace][1] == CASES[namespace][1]


def test_a_cluster_selector_cannot_name_the_init_containers_restart_policy() -> None:
    with pytest.raises(ValidationError, match="restart_policy"):
        PrometheusSettings.model_validate(
            {"url": "http://prometheus:9090", "cluster_selector": 'cluster="prod", restart_policy="Always"'}
        )
