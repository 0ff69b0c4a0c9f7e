"""A group of TPU slices whose slices a drainer deletes never shrinks by a resize: the executor's removal of failed
units sends the target it read at the start of the tick, and the adapter reads the group again; an ERROR slice
counted failed then (nothing ran on it) and running a job's pod by the resize is a ready slice, which made that
target one short, and the resize deleted the highest-index ready slice, busy or not, with no drain. Such a resize is
now rejected, deleting only the slices failed as read now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from kubernetes import client as k8s

from actuators.cloud_wiring import build_cloud_actuators
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.slice_drain import KubernetesSliceDrainer
from config.cloud import CloudSettings
from kube import KubernetesApi
from kube.api import SHARED_POD_LIST_FOR
from models import ActionStatus
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, POOL, SLICES
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

START = datetime(2024, 5, 1, tzinfo=UTC)


def _hosts(slice_name: str) -> list[str]:
    return [f"gke-ml-{slice_name}-host-{i}" for i in range(SLICES.hosts_per_slice)]


def _train(kube: FakeKubeApi, slice_name: str) -> None:
    """A multi-host job's pod on the slice's last host."""
    node = _hosts(slice_name)[-1]
    kube.put("pods", objs.pod(f"train-{node}", node, accelerators=4, resource=objs.TPU_RESOURCE, owner_kind="Job"))


@dataclass
class Drained:
    actuator: GkeTpuSliceActuator
    clock: SimulatedClock


@pytest.fixture
def rig(kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi) -> Drained:
    """A drained adapter over three running 4-host slices of group v5e, every host registered, with the group's
    slice drainer reading their nodes."""
    clock = SimulatedClock(START)
    kube_api.clock = clock.now
    clients = google_clients(gke_api.url)
    actuator = GkeTpuSliceActuator(clients.gke, CLUSTER, [SLICES], clock, migs=clients.migs, drained=True)
    KubernetesSliceDrainer(KubernetesApi(kube_client), clock, actuator)
    for i in range(3):
        name = f"v5e-{i}"
        gke_api.add_pool(name, nodes=SLICES.hosts_per_slice)
        for host in _hosts(name):
            kube_api.put("nodes", objs.node(host, name, accelerators=4, resource=objs.TPU_RESOURCE))
            kube_api.put("pods", objs.pod(f"logs-{host}", host, namespace="kube-system", owner_kind="DaemonSet"))
    return Drained(actuator, clock)


def _statuses(gke: FakeGkeApi) -> dict[str, str]:
    return {name: pool.status for name, pool in gke.pools.items()}


def test_an_error_slice_that_took_a_job_before_its_removal_is_not_deleted(
    rig: Drained, kube_api: FakeKubeApi, gke_api: FakeGkeApi
) -> None:
    drained = rig.actuator
    gke_api.report_error("v5e-2")
    (state,) = drained.list_pools()  # the tick's read: v5e-2 in ERROR, nothing on it
    assert (state.ready_units, state.target_units, state.failed_units) == (2, 2, 1)
    _train(kube_api, "v5e-2")  # a job's pod lands on it: every host running, a ready slice

    result = drained.resize(POOL, state.target_units, "v5e->clear-failed")  # what the removal of failed units sends

    assert result.status is ActionStatus.REJECTED
    assert "pool changed since the plan: it holds 3 slices, more than the 2 asked" in result.detail
    assert _statuses(gke_api) == {"v5e-0": "RUNNING", "v5e-1": "RUNNING", "v5e-2": "ERROR"}
    assert gke_api.calls("DELETE", "/nodePools/") == 0
    assert drained.resize(POOL, state.target_units, "v5e->clear-failed") == result  # the same key, the same answer


def test_only_the_slices_failed_as_read_now_are_deleted(
    rig: Drained, kube_api: FakeKubeApi, gke_api: FakeGkeApi
) -> None:
    drained = rig.actuator
    gke_api.report_error("v5e-1")
    gke_api.report_error("v5e-2")
    (state,) = drained.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    _train(kube_api, "v5e-1")  # one of them takes a job; v5e-2 stays idle, failed
    rig.clock.advance(SHARED_POD_LIST_FOR)  # the tick's reads took that long: the cluster's pods are listed again

    result = drained.resize(POOL, state.target_units, "v5e->clear-failed")

    assert result.status is ActionStatus.REJECTED
    assert result.detail.startswith("deleting failed slices v5e-2; pool changed since the plan: it holds 2 slices")
    assert _statuses(gke_api) == {"v5e-0": "RUNNING", "v5e-1": "ERROR", "v5e-2": "STOPPING"}
    assert gke_api.calls("DELETE", "/nodePools/") == 1


def test_a_resize_to_the_target_as_read_now_still_removes_the_failed_slices(rig: Drained, gke_api: FakeGkeApi) -> None:
    drained = rig.actuator
    gke_api.report_error("v5e-2")
    (state,) = drained.list_pools()

    result = drained.resize(POOL, state.target_units, "v5e->clear-failed")

    assert result.status is ActionStatus.STARTED
    assert result.detail == "target 2 slices: delete v5e-2"
    assert _statuses(gke_api) == {"v5e-0": "RUNNING", "v5e-1": "RUNNING", "v5e-2": "STOPPING"}


def test_the_daemons_slice_adapter_is_drained(gke_api: FakeGkeApi) -> None:
    for i in range(2):
        gke_api.add_pool(f"v5e-{i}", nodes=SLICES.hosts_per_slice)
    cloud = CloudSettings.model_validate(
        {
            "project": "test-project",
            "location": "us-central1",
            "cluster": "ml",
            "endpoint": gke_api.url,
            "tpu_slice_groups": [
                {"pool": "v5e", "group": "v5e", "machine_type": "ct5lp-hightpu-4t", "tpu_topology": "4x4"}
            ],
        }
    )
    built = build_cloud_actuators(cloud, SimulatedClock(START))

    result = built.router.resize("v5e", 1, "down")

    assert result.status is ActionStatus.REJECTED
    assert "it holds 2 slices, more than the 1 asked" in result.detail
    assert _statuses(gke_api) == {"v5e-0": "RUNNING", "v5e-1": "RUNNING"}
    assert gke_api.calls("DELETE", "/nodePools/") == 0
