"""Every cloud write is sent once: a Google client's default retry would send it again with the whole time limit
(``actuators.write_window``) each time, after the leadership the write was allowed for may have run out. GKE's
``delete_node_pool`` is the one write whose client retries by default (503 and 504, for 20 s); the others are sent
with ``retry=None`` too, so no client default can start to. The real Google clients on the fake GKE, Compute
Engine and Cloud TPU APIs, each write answered 503 UNAVAILABLE three times."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from config.cloud import NodePoolMapping
from models import ActionResult, TransientActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, QUEUED, SLICES, START
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.google_api import GoogleJsonServer
from tests.fakes.tpu_api import FakeTpuApi

# (the server, the method and a fragment of the write's path, the change that sends it)
Write = tuple[GoogleJsonServer, str, str, Callable[[], ActionResult]]


@pytest.fixture
def tpu() -> Iterator[FakeTpuApi]:
    fake = FakeTpuApi()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def _node_pools(gke: FakeGkeApi, mode: str = "refuse") -> GkeNodePoolActuator:
    clients = google_clients(gke.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling=mode)  # type: ignore[arg-type]
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(START))


def _slices(gke: FakeGkeApi) -> GkeTpuSliceActuator:
    return GkeTpuSliceActuator(google_clients(gke.url).gke, CLUSTER, [SLICES], SimulatedClock(START))


def _queued(tpu: FakeTpuApi) -> CloudTpuQueuedResourceActuator:
    return CloudTpuQueuedResourceActuator(google_clients(tpu.url).tpu, "test-project", [QUEUED], SimulatedClock(START))


def _write(case: str, gke: FakeGkeApi, tpu: FakeTpuApi) -> Write:
    if case == "compute-resize":
        gke.add_pool("a100", nodes=3, zones=("us-central1-a", "us-central1-b"))  # 2 + 1 -> 3 + 2: zone by zone
        return gke, "POST", "/resize", lambda: _node_pools(gke).resize("gpu", 5, "k")
    if case == "compute-delete-instances":
        gke.add_pool("a100", nodes=2)
        return gke, "POST", "/deleteInstances", lambda: _node_pools(gke).resize("gpu", 1, "k")
    if case == "gke-set-autoscaling":
        gke.add_pool("a100", nodes=2, autoscaling={"enabled": True, "minNodeCount": 0, "maxNodeCount": 4})
        return gke, "POST", ":setAutoscaling", lambda: _node_pools(gke, "move-bounds").resize("gpu", 3, "k")
    if case == "gke-slice-create":
        return gke, "POST", "/nodePools", lambda: _slices(gke).resize(SLICES.pool, 1, "k")
    if case == "gke-slice-delete":
        gke.add_pool("v5e-0", nodes=SLICES.hosts_per_slice)
        return gke, "DELETE", "/nodePools/v5e-0", lambda: _slices(gke).delete_nodes(SLICES.pool, ["v5e-0"], "k")
    if case == "tpu-queued-resource-create":
        return tpu, "POST", "/queuedResources", lambda: _queued(tpu).resize(QUEUED.pool, 1, "k")
    assert case == "tpu-queued-resource-delete"
    queued = _queued(tpu)
    queued.resize(QUEUED.pool, 1, "up")
    tpu.set_state("v5e-0", "FAILED")
    return tpu, "DELETE", "/queuedResources/v5e-0", lambda: queued.resize(QUEUED.pool, 0, "k")


@pytest.mark.parametrize(
    "case",
    [
        "compute-resize",
        "compute-delete-instances",
        "gke-set-autoscaling",
        "gke-slice-create",
        "gke-slice-delete",
        "tpu-queued-resource-create",
        "tpu-queued-resource-delete",
    ],
)
def test_a_cloud_write_answered_unavailable_is_sent_once_and_fails_as_transient(
    case: str, gke_api: FakeGkeApi, tpu: FakeTpuApi
) -> None:
    server, method, path, act = _write(case, gke_api, tpu)
    server.fail_next(3, 503, "The service is currently unavailable.", path=path, method=method)

    with pytest.raises(TransientActuatorError, match="503"):
        act()

    assert server.calls(method, path) == 1  # not sent again by the client: the next tick plans again
