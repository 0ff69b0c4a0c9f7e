"""FakeKubeApi driven by the real kubernetes client: selectors, patches, evictions with PDBs and graceful
termination, leases, faults."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from models.clock import SimulatedClock
from tests.fakes import kube_objects as objs
from tests.fakes.kube_api import MULTIPLE_PDBS, FakeKubeApi, RequestRecord, label_selector_matches


def _meta(kube_api: FakeKubeApi, pod: str) -> dict[str, Any]:
    found = kube_api.get("pods", pod, "default")
    assert found is not None
    meta: dict[str, Any] = found["metadata"]
    return meta


@pytest.fixture
def core(kube_client: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(kube_client)


def test_nodes_list_by_label_and_cordon_with_both_patch_types(kube_api: FakeKubeApi, core: k8s.CoreV1Api) -> None:
    kube_api.put("nodes", objs.node("gpu-1", "a100"))
    kube_api.put("nodes", objs.node("gpu-2", "a100"))
    kube_api.put("nodes", objs.node("cpu-1", "system", accelerators=0))

    listed = core.list_node(label_selector=f"{objs.NODE_POOL_LABEL}=a100")
    assert [n.metadata.name for n in listed.items] == ["gpu-1", "gpu-2"]
    assert listed.items[0].status.allocatable[objs.GPU_RESOURCE] == "8"

    core.patch_node("gpu-1", {"spec": {"unschedulable": True}})  # a dict is sent as strategic-merge
    assert core.read_node("gpu-1").spec.unschedulable is True
    core.patch_node("gpu-1", {"spec": {"unschedulable": None}}, _content_type="application/merge-patch+json")
    assert core.read_node("gpu-1").spec.unschedulable is None
    core.patch_node("gpu-2", [{"op": "add", "path": "/metadata/labels/drain", "value": "yes"}])  # JSON patch
    assert core.read_node("gpu-2").metadata.labels["drain"] == "yes"


def test_pods_are_selected_by_node_name_and_labels(kube_api: FakeKubeApi, core: k8s.CoreV1Api) -> None:
    kube_api.put("pods", objs.pod("train-1", "gpu-1", accelerators=8, labels={"app": "train"}))
    kube_api.put("pods", objs.pod("train-2", "gpu-2", accelerators=8, labels={"app": "train"}))
    kube_api.put("pods", objs.pod("agent-1", "gpu-1", namespace="kube-system", owner_kind="DaemonSet"))

    on_node = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-1")
    assert sorted(p.metadata.name for p in on_node.items) == ["agent-1", "train-1"]
    labelled = core.list_namespaced_pod("default", label_selector="app in (train,serve),!skip")
    assert [p.metadata.name for p in labelled.items] == ["train-1", "train-2"]
    not_running = core.list_pod_for_all_namespaces(field_selector="status.phase!=Running")
    assert not_running.items == []


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a=b", {"a": "b"}, True),
        ("a==b,c!=d", {"a": "b", "c": "e"}, True),
        ("a!=b", {}, True),
        ("a", {"a": ""}, True),
        ("!a", {"a": "x"}, False),
        ("a in (x, y)", {"a": "y"}, True),
        ("a in (x,y)", {}, False),
        ("a notin (x,y)", {}, True),
        ("a notin (x,y),b=c", {"a": "z", "b": "d"}, False),
    ],
)
def test_label_selector_grammar(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert label_selector_matches(selector, labels) is expected


def test_eviction_respects_min_available(kube_api: FakeKubeApi, core: k8s.CoreV1Api) -> None:
    for i in range(3):
        kube_api.put("pods", objs.pod(f"web-{i}", f"n{i}", labels={"app": "web"}))
    kube_api.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=2), group="policy")
    eviction = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="web-0", namespace="default"))

    core.create_namespaced_pod_eviction("web-0", "default", eviction)
    assert _meta(kube_api, "web-0").get("deletionTimestamp")  # terminating: still listed for its grace period
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("web-1", "default", eviction)
    assert refused.value.status == 429
    assert "needs 2 healthy pods and has 2" in refused.value.body
    assert kube_api.get("pods", "web-1", "default") is not None


def test_eviction_respects_max_unavailable_against_the_controller_scale(
    kube_api: FakeKubeApi, core: k8s.CoreV1Api
) -> None:
    for i in range(4):
        kube_api.put("pods", objs.pod(f"db-{i}", f"n{i}", labels={"app": "db"}))
    budget = objs.pdb("db", {"app": "db"}, max_unavailable="25%", expected_pods=4)
    kube_api.put("poddisruptionbudgets", budget, group="policy")
    body = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="db-0", namespace="default"))
    core.create_namespaced_pod_eviction("db-0", "default", body)
    with pytest.raises(ApiException) as refused:  # 3 healthy of 4 expected: the one allowed disruption is used
        core.create_namespaced_pod_eviction("db-1", "default", body)
    assert refused.value.status == 429
    kube_api.put("pods", objs.pod("db-0b", "n5", labels={"app": "db"}))  # the controller's replacement is ready
    core.create_namespaced_pod_eviction("db-1", "default", body)
    with pytest.raises(ApiException) as missing:
        core.create_namespaced_pod_eviction("nope", "default", body)
    assert missing.value.status == 404


def test_unhealthy_pods_can_always_be_evicted(kube_api: FakeKubeApi, core: k8s.CoreV1Api) -> None:
    kube_api.put("pods", objs.pod("job-0", "n0", labels={"app": "job"}, phase="Pending"))
    kube_api.put("pods", objs.pod("job-1", None, labels={"app": "job"}, phase="Pending"))  # on no node
    kube_api.put("poddisruptionbudgets", objs.pdb("job", {"app": "job"}, min_available=2), group="policy")
    kube_api.put("poddisruptionbudgets", objs.pdb("job-too", {"app": "job"}, min_available=2), group="policy")
    for name in ("job-0", "job-1"):  # budgets are not looked at, not even two of them
        core.create_namespaced_pod_eviction(name, "default", k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=name)))
    assert _meta(kube_api, "job-0")["deletionGracePeriodSeconds"] == 30
    assert kube_api.get("pods", "job-1", "default") is None  # never scheduled: deleted at once


def test_an_evicted_pod_terminates_for_its_grace_period(kube_api: FakeKubeApi, core: k8s.CoreV1Api) -> None:
    clock = SimulatedClock(datetime(2024, 5, 1, 12, 0, tzinfo=UTC))
    kube_api.clock = clock.now
    for name, grace in (("default-grace", None), ("quick", 0), ("checkpoint", 120), ("finished", 60)):
        pod = objs.pod(name, "n0", phase="Succeeded" if name == "finished" else "Running")
        if grace is not None:
            pod["spec"]["terminationGracePeriodSeconds"] = grace
        kube_api.put("pods", pod)
        core.create_namespaced_pod_eviction(name, "default", k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=name)))
    listed = {p.metadata.name: p for p in core.list_namespaced_pod("default").items}
    assert sorted(listed) == ["checkpoint", "default-grace"]  # grace 0 and a finished pod: deleted at once
    assert listed["default-grace"].metadata.deletion_grace_period_seconds == 30
    assert listed["default-grace"].metadata.deletion_timestamp == clock.now() + timedelta(seconds=30)
    assert listed["checkpoint"].metadata.deletion_timestamp == clock.now() + timedelta(seconds=120)

    version = listed["checkpoint"].metadata.resource_version
    core.create_namespaced_pod_eviction("checkpoint", "default", k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="x")))
    assert core.read_namespaced_pod("checkpoint", "default").metadata.resource_version == version  # already going

    clock.advance(timedelta(seconds=30))
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["checkpoint"]
    clock.advance(timedelta(seconds=90))
    assert core.list_namespaced_pod("default").items == []
    assert kube_api.calls("delete", "pods") == 0


def test_a_lost_kubelet_never_finishes_its_pods(kube_api: FakeKubeApi, core: k8s.CoreV1Api) -> None:
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    kube_api.clock = clock.now
    kube_api.put("pods", objs.pod("stuck", "lost"))
    kube_api.put("pods", objs.pod("fine", "n0"))
    kube_api.stop_kubelet("lost")
    for name in ("stuck", "fine"):
        core.create_namespaced_pod_eviction(name, "default", k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=name)))
    clock.advance(timedelta(hours=1))
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["stuck"]
    assert kube_api.finish_terminating("default", "stuck") == ["stuck"]
    assert kube_api.get("pods", "stuck", "default") is None


def test_a_pod_under_two_budgets_cannot_be_evicted(kube_api: FakeKubeApi, core: k8s.CoreV1Api) -> None:
    kube_api.put("pods", objs.pod("web-0", "n0", labels={"app": "web", "tier": "front"}))
    kube_api.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, max_unavailable=1), group="policy")
    kube_api.put("poddisruptionbudgets", objs.pdb("front", {"tier": "front"}, max_unavailable=1), group="policy")
    kube_api.put("poddisruptionbudgets", {"metadata": {"name": "empty", "namespace": "default"}, "spec": {}}, "policy")
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("web-0", "default", k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="w")))
    assert refused.value.status == 500
    assert json.loads(refused.value.body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": MULTIPLE_PDBS,
        "code": 500,
    }
    assert _meta(kube_api, "web-0").get("deletionTimestamp") is None
    kube_api.delete("poddisruptionbudgets", "front", "default", group="policy")  # the empty one selects nothing
    core.create_namespaced_pod_eviction("web-0", "default", k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="w")))


def test_lease_conflict_on_stale_resource_version(kube_client: k8s.ApiClient) -> None:
    leases = k8s.CoordinationV1Api(kube_client)
    body = k8s.V1Lease(
        metadata=k8s.V1ObjectMeta(name="leadtime", namespace="ops"),
        spec=k8s.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15),
    )
    created = leases.create_namespaced_lease("ops", body)
    with pytest.raises(ApiException) as exists:
        leases.create_namespaced_lease("ops", body)
    assert exists.value.status == 409
    stale_version = created.metadata.resource_version

    created.spec.holder_identity = "b"
    renewed = leases.replace_namespaced_lease("leadtime", "ops", created)
    assert renewed.spec.holder_identity == "b"
    assert renewed.metadata.resource_version != stale_version

    created.metadata.resource_version = stale_version
    created.spec.holder_identity = "c"
    with pytest.raises(ApiException) as conflict:
        leases.replace_namespaced_lease("leadtime", "ops", created)
    assert conflict.value.status == 409
    assert leases.read_namespaced_lease("leadtime", "ops").spec.holder_identity == "b"

    patch = {"metadata": {"resourceVersion": stale_version}, "spec": {"holderIdentity": "c"}}
    with pytest.raises(ApiException) as patch_conflict:
        leases.patch_namespaced_lease("leadtime", "ops", patch)
    assert patch_conflict.value.status == 409
    patched = leases.patch_namespaced_lease("leadtime", "ops", {"spec": {"holderIdentity": "c"}})
    assert patched.spec.holder_identity == "c"


def test_configmaps_events_and_the_request_log(kube_api: FakeKubeApi, core: k8s.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("ledger", "ops")
    assert missing.value.status == 404
    cm = core.create_namespaced_config_map(
        "ops", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="ledger"), data={"spend": "1"})
    )
    cm.data["spend"] = "2"
    core.replace_namespaced_config_map("ledger", "ops", cm)
    assert core.read_namespaced_config_map("ledger", "ops").data == {"spend": "2"}
    core.create_namespaced_event(
        "ops",
        k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(generate_name="leadtime-"),
            involved_object=k8s.V1ObjectReference(kind="ConfigMap", name="ledger", namespace="ops"),
            reason="ScaledUp",
            message="pool a100 to 3 nodes",
        ),
    )
    assert len(kube_api.list("events", namespace="ops")) == 1
    assert kube_api.requests == [
        RequestRecord("get", "", "configmaps", "", "ops", "ledger"),
        RequestRecord("create", "", "configmaps", "", "ops", ""),
        RequestRecord("update", "", "configmaps", "", "ops", "ledger"),
        RequestRecord("get", "", "configmaps", "", "ops", "ledger"),
        RequestRecord("create", "", "events", "", "ops", ""),
    ]


def test_injected_failures_then_recovery(kube_api: FakeKubeApi, core: k8s.CoreV1Api) -> None:
    kube_api.put("nodes", objs.node("gpu-1", "a100"))
    kube_api.fail_next(2, 500, verb="get", resource="nodes")
    for _ in range(2):
        with pytest.raises(ApiException) as failed:
            core.read_node("gpu-1")
        assert failed.value.status == 500
    assert core.read_node("gpu-1").metadata.name == "gpu-1"
    kube_api.fail_next(1, 429)
    with pytest.raises(ApiException) as limited:
        core.list_node()
    assert limited.value.status == 429


def test_stop_refuses_connections_and_restart_keeps_port_and_objects(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    core = k8s.CoreV1Api(kube_client)
    kube_api.put("nodes", objs.node("gpu-1", "a100"))
    assert core.read_node("gpu-1").metadata.name == "gpu-1"  # opens a keep-alive connection
    port = kube_api.port
    kube_api.stop()
    kube_client.rest_client.pool_manager.connection_pool_kw["retries"] = False
    with pytest.raises(Exception) as refused:  # noqa: PT011 - urllib3 raises a connection error class here
        core.read_node("gpu-1", _request_timeout=2)
    assert "refused" in str(refused.value).lower() or "connection" in str(refused.value).lower()
    kube_api.start()
    assert kube_api.port == port
    assert core.read_node("gpu-1", _request_timeout=2).metadata.name == "gpu-1"
