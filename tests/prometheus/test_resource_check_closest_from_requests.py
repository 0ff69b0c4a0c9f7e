"""The resource check's "closest name" hint reads what pods requested as well as what nodes offered.

A class whose configured resource no node offered and no pod requested is named with the resources that come
closest. With a cloud pool at zero nodes no node offers the accelerator, so a hint read from node capacities alone
said "no node offers a resource with a similar name" for a mistyped ``nvidia.com/gpus`` while pods requested
``nvidia_com_gpu``. The series are shaped as kube-state-metrics gives them (tests/fakes/REFERENCE.md) and read from a
real Prometheus server: the only node offers cpu, a finished job's app container asked 8 GPUs earlier in the
lookback (and not at the check's time), and a pod's init container asks 4 TPU chips now."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from agent.sources.prometheus import PrometheusSource
from agent.sources.resource_check import known_resources_query, unknown_resources
from config.prometheus import PrometheusSettings
from models import DemandClass
from models.demand import AcceleratorFamily
from tests.prometheus.server import serving_openmetrics

pytestmark = pytest.mark.xdist_group("prometheus")
T0 = 1_700_000_000
MINUTES = 30
AT = datetime.fromtimestamp(T0 + (MINUTES - 1) * 60, UTC)
LOOKBACK = timedelta(hours=1)
FINISHED_AFTER = 10  # minutes: the GPU job's series end there, 19 minutes before the check


def _pod(namespace: str, kind: str, resource: str, requested: float) -> dict[str, float]:
    pod = f'instance="ksm-0",namespace="{namespace}",pod="{namespace}-0",uid="u-{namespace}"'
    cpu = 'node="n1",resource="cpu",unit="core"'
    accelerator = f'node="n1",resource="{resource}",unit="integer"'
    series = {
        f'kube_pod_status_phase{{{pod},phase="Running"}}': 1.0,
        f'kube_pod_container_resource_requests{{{pod},container="main",{cpu}}}': 2.0,
    }
    family = "kube_pod_init_container_resource_requests" if kind == "init" else "kube_pod_container_resource_requests"
    container = "init-0" if kind == "init" else "worker"
    series[f'{family}{{{pod},container="{container}",{accelerator}}}'] = requested
    return series


def _openmetrics() -> str:
    lasting = {
        'kube_node_status_capacity{instance="ksm-0",node="n1",resource="cpu",unit="core"}': 32.0,
        **_pod("prep", "init", "google_com_tpu", 4.0),
    }
    finished = _pod("train", "app", "nvidia_com_gpu", 8.0)
    series = {name: (value, MINUTES) for name, value in lasting.items()}
    series |= {name: (value, FINISHED_AFTER) for name, value in finished.items()}
    lines: list[str] = []
    for family in sorted({name.split("{")[0] for name in series}):
        lines.append(f"# TYPE {family} gauge\n")
        for name, (value, minutes) in sorted(series.items()):
            if name.split("{")[0] == family:
                lines.extend(f"{name} {value:g} {T0 + m * 60}\n" for m in range(minutes))
    return "".join(lines) + "# EOF\n"


CLASSES = (
    DemandClass("train", AcceleratorFamily.GPU),
    DemandClass("prep", AcceleratorFamily.TPU),
    DemandClass("fpga", AcceleratorFamily.GPU),
)


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusSettings]:
    with serving_openmetrics(_openmetrics(), tmp_path_factory.mktemp("prometheus-resource-hint")) as server:
        classes = {
            "train": {"resource": "nvidia.com/gpus"},  # one letter too many
            "prep": {"resource": "google.com/tpus"},
            "fpga": {"resource": "xilinx.com/fpga"},  # nothing like it anywhere
        }
        yield PrometheusSettings.model_validate({"url": server.url, "retries": 0, "classes": classes})


def _hints(settings: PrometheusSettings) -> dict[str, str]:
    source = PrometheusSource.from_settings(settings, {})
    warnings = unknown_resources(source, CLASSES, settings, AT, LOOKBACK)
    return {w.split(":")[0].removeprefix("class(es) "): w.split("; ")[1].split(". ")[0] for w in warnings}


def test_the_closest_names_come_from_pods_requests_when_no_node_offers_the_accelerator(
    settings: PrometheusSettings,
) -> None:
    assert _hints(settings) == {
        "train": "the closest resources nodes offered or pods requested in that time: nvidia_com_gpu",
        "prep": "the closest resources nodes offered or pods requested in that time: google_com_tpu",
        "fpga": "no node offered and no pod requested a resource with a similar name in that time",
    }


def test_the_known_resources_are_those_of_nodes_and_of_app_and_init_containers_over_the_lookback(
    settings: PrometheusSettings,
) -> None:
    source = PrometheusSource.from_settings(settings, {})
    answer = source.instant("resource check", known_resources_query(LOOKBACK), AT)
    assert sorted(labels["resource"] for labels, _ in answer) == ["cpu", "google_com_tpu", "nvidia_com_gpu"]
    recent = source.instant("resource check", known_resources_query(timedelta(minutes=5)), AT)
    assert sorted(labels["resource"] for labels, _ in recent) == ["cpu", "google_com_tpu"]  # the job ended earlier
