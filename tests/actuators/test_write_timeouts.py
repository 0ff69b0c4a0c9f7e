"""Every call that changes a pool is sent with the write's time limit (``actuators.write_window``): a cloud that does
not answer is given up on within it, instead of after the client's default (45 s for GKE's setSize, 600 s for an
instance group's resize, 20 s x 3 attempts for AWS). The real Google clients on the fake GKE, Compute Engine and
Cloud TPU APIs, and the AWS adapters as the daemon builds them (boto3 on moto behind the AWS proxy); the write is held
by the fake until the test has looked."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from actuators.aws_wiring import build_aws_actuators
from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.write_window import WriteWindow, write_window
from config.aws import AutoScalingGroupMapping, AwsSettings, NodegroupMapping
from config.cloud import NodePoolMapping
from models import ActionResult, TransientActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER, QUEUED, SLICES, START
from tests.fakes.aws_api import REGION, FakeAwsApi
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.tpu_api import FakeTpuApi

LIMIT = timedelta(seconds=0.5)  # the held write is the change's first: nothing has to be answered within the limit
# A pool under move-bounds has its instance group resized before its autoscaler bounds are moved: that earlier write,
# answered, must be within the limit too, on a busy machine.
LIMITS = {"gke-set-autoscaling": timedelta(seconds=1)}
# How long the fake holds the write at most: far longer than the limit, shorter than any client default (the
# shortest is AWS's 20 s read timeout), so a write sent without the limit is answered and the test fails on it.
HELD = 15.0


class Hold:
    """Holds the first request that ``matches`` until released (at most ``HELD`` seconds), then answers it."""

    def __init__(self, matches: Callable[[str, str, bytes], bool]) -> None:
        self.matches = matches
        self.held = 0
        self.release = threading.Event()
        self.answered = threading.Event()

    def around(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def respond(method: str, path: str, headers: dict[str, str], body: bytes) -> Any:
            if self.held or not self.matches(method, path, body):
                return real(method, path, headers, body)
            self.held += 1
            self.release.wait(HELD)
            try:
                return real(method, path, headers, body)
            finally:
                self.answered.set()

        return respond


Case = Callable[[pytest.MonkeyPatch], tuple[Hold, Callable[[], ActionResult]]]


@pytest.fixture
def gke() -> Iterator[FakeGkeApi]:
    fake = FakeGkeApi()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def tpu() -> Iterator[FakeTpuApi]:
    fake = FakeTpuApi()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def _held(fake: Any, monkeypatch: pytest.MonkeyPatch, method: str, path_end: str) -> Hold:
    hold = Hold(lambda m, path, _body: m == method and path.split("?", 1)[0].endswith(path_end))
    monkeypatch.setattr(fake, "respond", hold.around(fake.respond))
    return hold


def _node_pools(gke: FakeGkeApi, mode: str = "refuse") -> GkeNodePoolActuator:
    clients = google_clients(gke.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100", gke_autoscaling=mode)  # type: ignore[arg-type]
    return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], SimulatedClock(START))


def _google_cases(gke: FakeGkeApi, tpu: FakeTpuApi) -> dict[str, Case]:
    def zone_resize(mp: pytest.MonkeyPatch) -> tuple[Hold, Callable[[], ActionResult]]:
        gke.add_pool("a100", nodes=3, zones=("us-central1-a", "us-central1-b"))  # 2 + 1 -> 3 + 2: zone by zone
        return _held(gke, mp, "POST", "/resize"), lambda: _node_pools(gke).resize("gpu", 5, "k")

    def delete_instances(mp: pytest.MonkeyPatch) -> tuple[Hold, Callable[[], ActionResult]]:
        gke.add_pool("a100", nodes=2)
        return _held(gke, mp, "POST", "/deleteInstances"), lambda: _node_pools(gke).resize("gpu", 1, "k")

    def set_autoscaling(mp: pytest.MonkeyPatch) -> tuple[Hold, Callable[[], ActionResult]]:
        gke.add_pool("a100", nodes=2, autoscaling={"enabled": True, "minNodeCount": 0, "maxNodeCount": 4})
        hold = _held(gke, mp, "POST", ":setAutoscaling")
        return hold, lambda: _node_pools(gke, "move-bounds").resize("gpu", 3, "k")

    def slice_create(mp: pytest.MonkeyPatch) -> tuple[Hold, Callable[[], ActionResult]]:
        slices = GkeTpuSliceActuator(google_clients(gke.url).gke, CLUSTER, [SLICES], SimulatedClock(START))
        return _held(gke, mp, "POST", "/nodePools"), lambda: slices.resize(SLICES.pool, 1, "k")

    def slice_delete(mp: pytest.MonkeyPatch) -> tuple[Hold, Callable[[], ActionResult]]:
        slices = GkeTpuSliceActuator(google_clients(gke.url).gke, CLUSTER, [SLICES], SimulatedClock(START))
        slices.resize(SLICES.pool, 1, "up")
        gke.advance()
        (name,) = slices.ready_slices(SLICES.pool)
        return _held(gke, mp, "DELETE", f"/nodePools/{name}"), lambda: slices.delete_nodes(SLICES.pool, [name], "k")

    def queued_create(mp: pytest.MonkeyPatch) -> tuple[Hold, Callable[[], ActionResult]]:
        client = google_clients(tpu.url).tpu
        queued = CloudTpuQueuedResourceActuator(client, "test-project", [QUEUED], SimulatedClock(START))
        return _held(tpu, mp, "POST", "/queuedResources"), lambda: queued.resize(QUEUED.pool, 1, "k")

    return {
        "compute-resize": zone_resize,
        "compute-delete-instances": delete_instances,
        "gke-set-autoscaling": set_autoscaling,
        "gke-slice-create": slice_create,
        "gke-slice-delete": slice_delete,
        "tpu-queued-resource-create": queued_create,
    }


@pytest.mark.parametrize(
    "case",
    [
        "compute-resize",
        "compute-delete-instances",
        "gke-set-autoscaling",
        "gke-slice-create",
        "gke-slice-delete",
        "tpu-queued-resource-create",
    ],
)
def test_a_google_write_that_gets_no_answer_is_given_up_within_its_time_limit(
    case: str, gke: FakeGkeApi, tpu: FakeTpuApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold, act = _google_cases(gke, tpu)[case](monkeypatch)
    _given_up_within_the_limit(hold, act, LIMITS.get(case, LIMIT))


def _aws(aws_api: FakeAwsApi, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    settings = AwsSettings(
        region=REGION,
        cluster="ml",
        endpoint=aws_api.url,
        nodegroups=(NodegroupMapping(pool="od", nodegroup="p5"),),
        auto_scaling_groups=(AutoScalingGroupMapping(pool="spot", group="gpu-spot"),),
    )
    return dict(build_aws_actuators(settings, SimulatedClock(START)).routes)


@pytest.mark.parametrize(
    ("pool", "operation", "sent", "nodes", "to_units"),
    [
        ("spot", "SetDesiredCapacity", "Action=SetDesiredCapacity", 1, 2),
        ("spot", "TerminateInstanceInAutoScalingGroup", "Action=TerminateInstanceInAutoScalingGroup", 2, 1),
        ("od", "UpdateNodegroupConfig", "/node-groups/p5/update-config", 1, 2),
    ],
)
def test_an_aws_write_is_one_attempt_given_up_within_its_time_limit(
    pool: str,
    operation: str,
    sent: str,
    nodes: int,
    to_units: int,
    aws_api: FakeAwsApi,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if pool == "spot":
        aws_api.add_group("gpu-spot", nodes=nodes)
    else:
        aws_api.add_nodegroup("ml", "p5", nodes=nodes)
    adapter = _aws(aws_api, monkeypatch)[pool]
    instances = aws_api.group("gpu-spot")["Instances"] if pool == "spot" else []
    act: Callable[[], ActionResult] = (  # the daemon's adapters terminate drained nodes only
        (lambda: adapter.delete_nodes(pool, [instances[-1]["InstanceId"]], "k"))
        if operation == "TerminateInstanceInAutoScalingGroup"
        else (lambda: adapter.resize(pool, to_units, "k"))
    )
    hold = Hold(lambda _m, path, body: sent in path or sent in body.decode(errors="replace"))
    monkeypatch.setattr(aws_api, "handle", hold.around(aws_api.handle))
    _given_up_within_the_limit(hold, act)
    assert aws_api.calls(operation) == 1  # one attempt: a retry could land after the leader's deadline


def _given_up_within_the_limit(hold: Hold, act: Callable[[], ActionResult], limit: timedelta = LIMIT) -> None:
    started = time.monotonic()
    try:
        with write_window(WriteWindow(limit, lambda: None)), pytest.raises(TransientActuatorError):
            act()
        took = time.monotonic() - started
    finally:
        hold.release.set()  # the cloud answers now, to no one
        hold.answered.wait(HELD)
    assert hold.held == 1  # the write was sent
    # Given up within its limit, not when the fake answers: the margin is for a machine busy with other work (a run
    # beside the whole suite on 2 cores took 4.1 s for the 1 s limit).
    assert took < HELD / 2
