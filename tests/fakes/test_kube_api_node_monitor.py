"""FakeKubeApi's node lifecycle controller: a node whose kubelet stopped posting its status is marked Unknown once
the node monitor's grace period has passed, as the real client reads it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from models.clock import SimulatedClock
from tests.fakes import kube_objects as objs
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.kube_api.evictions import NODE_MONITOR_GRACE_PERIOD


def _ready(core: k8s.CoreV1Api, node: str) -> tuple[str, str | None, str | None]:
    (condition,) = [c for c in core.read_node(node).status.conditions if c.type == "Ready"]
    return condition.status, condition.reason, condition.message


def test_a_node_whose_kubelet_stopped_goes_unknown_after_the_node_monitors_grace_period(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    core = k8s.CoreV1Api(kube_client)
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now
    for name in ("lost", "fine"):
        kube_api.put("nodes", objs.node(name, "a100"))
    kube_api.stop_kubelet("lost")

    clock.advance(NODE_MONITOR_GRACE_PERIOD - timedelta(seconds=1))
    assert _ready(core, "lost") == ("True", None, None)
    version = core.read_node("lost").metadata.resource_version

    clock.advance(timedelta(seconds=1))
    assert _ready(core, "lost") == ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    (ready,) = core.read_node("lost").status.conditions
    assert ready.last_transition_time == datetime(2024, 5, 1, 0, 0, 50, tzinfo=UTC)
    assert ready.last_heartbeat_time == datetime(2024, 5, 1, tzinfo=UTC)
    assert core.read_node("lost").metadata.resource_version != version  # a write, as the controller's status update
    assert _ready(core, "fine") == ("True", None, None)

    later = core.read_node("lost").metadata.resource_version
    clock.advance(timedelta(hours=1))
    assert core.read_node("lost").metadata.resource_version == later  # marked once


def test_a_kubelet_stopped_long_ago_leaves_its_node_unknown_at_once(kube_api: FakeKubeApi) -> None:
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now
    kube_api.put("nodes", objs.node("lost", "a100"))
    kube_api.stop_kubelet("lost", since=datetime(2024, 4, 30, 23, 0, tzinfo=UTC))
    node = kube_api.get("nodes", "lost")
    assert node is not None
    assert [(c["type"], c["status"]) for c in node["status"]["conditions"]] == [("Ready", "Unknown")]


def test_a_kubelet_started_again_posts_ready_and_finishes_its_pods(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    core = k8s.CoreV1Api(kube_client)
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now
    node = objs.node("back", "a100")
    node["status"]["conditions"].append({"type": "MemoryPressure", "status": "False"})
    kube_api.put("nodes", node)
    kube_api.put("pods", objs.pod("train", "back", accelerators=8, owner_kind="Job"))
    kube_api.stop_kubelet("back")
    core.create_namespaced_pod_eviction("train", "default", k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="train")))
    clock.advance(timedelta(minutes=5))  # past the pod's 30 s grace period and the node monitor's 50 s
    assert _ready(core, "back")[0] == "Unknown"
    assert kube_api.get("pods", "train", "default") is not None  # no kubelet finishes it
    version = core.read_node("back").metadata.resource_version

    kube_api.start_kubelet("back")
    read = core.read_node("back")
    assert read.metadata.resource_version != version  # the kubelet's status update
    assert [(c.type, c.status, c.reason) for c in read.status.conditions] == [
        ("Ready", "True", "KubeletReady"),
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
    ]
    assert all(c.last_heartbeat_time == c.last_transition_time == clock.now() for c in read.status.conditions)
    assert kube_api.get("pods", "train", "default") is None  # finished at once: its time has long come
    clock.advance(timedelta(hours=1))
    assert _ready(core, "back")[0] == "True"  # not marked Unknown again
