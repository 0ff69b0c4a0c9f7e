"""A paged list of the cluster's pods whose continue token expires (410 Gone, reason Expired: the API server
compacted its history, every 5 minutes by default) is read again from its first page, once; a second expiry is a
transient failure, tried again next tick, and never blocks the pool as a permanent error would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from actuators.vendor_errors import from_kubernetes
from agent.drains import NodeDrains
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from kube.errors import translate
from models import ActionStatus, Resize, TransientActuatorError
from models.clock import SimulatedClock
from models.errors import KubernetesUnavailable
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import CONTINUE_EXPIRED, FakeKubeApi

CLUSTER = "projects/test-project/locations/us-central1/clusters/ml"


def _seed(kube_api: FakeKubeApi, nodes: list[str], pods_per_node: int) -> None:
    for node in nodes:
        kube_api.put("nodes", objs.node(node, "a100"))
        for i in range(pods_per_node):
            kube_api.put("pods", objs.pod(f"web-{node}-{i}", node, labels={"app": "web"}, owner_kind="ReplicaSet"))


def _names(by_node: dict[str, list[k8s.V1Pod]]) -> dict[str, list[str]]:
    return {node: sorted(p.metadata.name for p in pods) for node, pods in by_node.items()}


def test_the_fake_expires_a_continue_token_once_its_history_is_compacted(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    _seed(kube_api, ["n-0", "n-1"], 2)
    core = k8s.CoreV1Api(kube_client)
    first = core.list_pod_for_all_namespaces(limit=2)
    kube_api.compact()
    with pytest.raises(ApiException) as expired:
        core.list_pod_for_all_namespaces(limit=2, _continue=first.metadata._continue)
    assert expired.value.status == 410
    status = translate(expired.value)
    assert '"reason":"Expired"' in status.detail.replace(" ", "") and CONTINUE_EXPIRED in status.detail
    assert core.list_pod_for_all_namespaces(limit=4).metadata._continue is None  # a new list answers


def test_a_pod_list_whose_continue_token_expires_is_read_again_from_its_first_page(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    nodes = ["n-0", "n-1", "n-2"]
    _seed(kube_api, nodes, 2)
    pods = KubernetesApi(kube_client).pods
    kube_api.compact_before_continued_lists(1)
    before = kube_api.calls("list", "pods")

    by_node = pods.on_nodes(nodes, page_size=2)

    assert kube_api.calls("list", "pods") - before == 2 + 3  # a page, the expired one, then the 3 pages anew
    assert _names(by_node) == {node: [f"web-{node}-0", f"web-{node}-1"] for node in nodes}


def test_a_pod_list_expired_twice_in_a_row_is_a_transient_failure(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    nodes = ["n-0", "n-1", "n-2"]
    _seed(kube_api, nodes, 2)
    pods = KubernetesApi(kube_client).pods
    kube_api.compact_before_continued_lists(2)

    with pytest.raises(KubernetesUnavailable) as failed:
        pods.on_nodes(nodes, page_size=2)

    assert failed.value.status == 410 and "expired twice" in failed.value.detail
    assert isinstance(from_kubernetes("a", failed.value), TransientActuatorError)
    assert kube_api.calls("list", "pods") == 4  # two lists, each cut at its second page; not a third
    assert _names(pods.on_nodes(nodes, page_size=2)) == {n: [f"web-{n}-0", f"web-{n}-1"] for n in nodes}


def test_an_expired_list_is_never_a_permanent_error() -> None:
    gone = ApiException(status=410, reason="Gone")
    gone.body = (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The provided continue '
        'parameter is too old to display a consistent list result.","reason":"Expired","code":410}'
    )
    error = translate(gone)
    assert isinstance(error, KubernetesUnavailable)
    assert isinstance(from_kubernetes("a", error), TransientActuatorError)


def test_a_release_whose_pod_list_expires_twice_fails_for_now_and_does_not_block_the_pool(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """A pool of 6 nodes is surveyed with one list of the cluster's pods, in pages of 500: 520 pods take two."""
    gke_api.add_pool("a100", nodes=6)
    nodes = [i.name for m in gke_api.pools["a100"].migs for i in m.instances]
    _seed(kube_api, nodes, 0)
    kube_api.put("nodes", objs.node("cpu-0", "cpu"))
    for i in range(520):
        kube_api.put("pods", objs.pod(f"api-{i}", "cpu-0", labels={"app": "api"}, owner_kind="ReplicaSet"))
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now
    clients = google_clients(gke_api.url)
    actuator = GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [NodePoolMapping(pool="a", node_pool="a100")], clock
    )
    drainer = KubernetesNodeDrainer(KubernetesApi(kube_client), clock, {"a": "a100"}, actuator, timedelta(minutes=15))
    drains = NodeDrains({"a": drainer}, timedelta(0))
    assert len(nodes) == 6
    kube_api.compact_before_continued_lists(2)

    outcome = drains.scale_down(Resize("a", 6, 5, "idle", "r1"), clock.now())

    assert outcome.permanent == {}
    assert "a" in outcome.failing and "410" in outcome.failing["a"][1]
    assert [r.status for r in outcome.results] == [ActionStatus.FAILED]

    clock.advance(timedelta(minutes=1))
    later = drains.scale_down(Resize("a", 6, 5, "idle", "r2"), clock.now())
    assert later.permanent == {}
    assert [(r.status, r.key) for r in later.results] == [(ActionStatus.STARTED, f"r2/drain/{nodes[0]}")]
    clock.advance(timedelta(minutes=1))
    last = drains.continue_pending(clock.now())  # the node read empty again: removed
    assert [(r.status, r.key) for r in last.results] == [(ActionStatus.DONE, f"r2/drain/{nodes[0]}")]
