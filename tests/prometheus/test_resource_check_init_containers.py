"""The resource check counts a resource requested by init containers as used, as the default demand query does.

The default kube-state-metrics demand query reads a pod's init containers' requests
(``kube_pod_init_container_resource_requests``; a sidecar is an init container with ``restartPolicy: Always``), so
a class whose pods ask for the accelerator only there has demand. The check that warns of a resource no node
offered and no pod requested must then not call that resource a typo whose demand reads 0. The series are shaped
as kube-state-metrics gives them (tests/fakes/REFERENCE.md) and read from a real Prometheus server: a cloud pool at
zero nodes (the only node offers cpu), one pod whose run-once init container asks 8 GPUs (its app container CPU
only), one whose sidecar asks 2 TPU chips, and the resource ``amd_com_gpu`` that nothing ever asked for."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from agent.sources.resource_check import unknown_resources
from config.prometheus import PrometheusSettings
from models import DemandClass
from models.demand import AcceleratorFamily
from tests.prometheus.server import serving_openmetrics

pytestmark = pytest.mark.xdist_group("prometheus")
T0 = 1_700_000_000
MINUTES = 10
AT = datetime.fromtimestamp(T0 + (MINUTES - 1) * 60, UTC)
LOOKBACK = timedelta(hours=1)


def _pod(namespace: str, init_resource: str, requested: float, restart_policy: str) -> dict[str, float]:
    pod = f'instance="ksm-0",namespace="{namespace}",pod="{namespace}-0",uid="u-{namespace}"'
    cpu = 'node="n1",resource="cpu",unit="core"'
    init = f'node="n1",resource="{init_resource}",unit="integer"'
    policy = f',restart_policy="{restart_policy}"' if restart_policy else ""
    image = 'image_spec="img",image="img",image_id="",container_id=""'
    return {
        f'kube_pod_status_phase{{{pod},phase="Running"}}': 1.0,
        f'kube_pod_container_resource_requests{{{pod},container="main",{cpu}}}': 4.0,
        f'kube_pod_init_container_resource_requests{{{pod},container="init-0",{init}}}': requested,
        f'kube_pod_init_container_info{{{pod},container="init-0",{image}{policy}}}': 1.0,
    }


def _openmetrics() -> str:
    series = {
        'kube_node_status_capacity{instance="ksm-0",node="n1",resource="cpu",unit="core"}': 32.0,
        **_pod("train", "nvidia_com_gpu", 8.0, ""),
        **_pod("serve", "google_com_tpu", 2.0, "Always"),
    }
    lines: list[str] = []
    for family in sorted({name.split("{")[0] for name in series}):
        lines.append(f"# TYPE {family} gauge\n")
        for name, value in series.items():
            if name.split("{")[0] == family:
                lines.extend(f"{name} {value:g} {T0 + m * 60}\n" for m in range(MINUTES))
    return "".join(lines) + "# EOF\n"


CLASSES = (
    DemandClass("train", AcceleratorFamily.GPU),
    DemandClass("serve", AcceleratorFamily.TPU),
    DemandClass("infer", AcceleratorFamily.GPU),
)


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusSettings]:
    with serving_openmetrics(_openmetrics(), tmp_path_factory.mktemp("prometheus-resource-check")) as server:
        yield PrometheusSettings.model_validate(
            {"url": server.url, "retries": 0, "classes": {"infer": {"resource": "amd.com/gpu"}}}
        )


def test_a_resource_asked_for_by_init_containers_only_has_demand(settings: PrometheusSettings) -> None:
    source = PrometheusSource.from_settings(settings, demand_queries(CLASSES[:2], settings))
    readings, missing = source.newest_each(CLASSES[:2], AT)
    assert not missing
    assert {name: value for name, (_, value) in readings.items()} == {"train": 8.0, "serve": 2.0}


def test_the_check_warns_only_of_the_resource_nothing_asked_for(settings: PrometheusSettings) -> None:
    source = PrometheusSource.from_settings(settings, {})
    warnings = unknown_resources(source, CLASSES, settings, AT, LOOKBACK)
    assert [w.split(":")[0] for w in warnings] == ["class(es) infer"]
    assert "no node offered and no pod requested the resource 'amd_com_gpu'" in warnings[0]
