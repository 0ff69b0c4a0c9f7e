"""FakeKubeApi's Events and discovery, driven by the real kubernetes client, hold to the facts in
``tests/fakes/kube_events.py``: where an Event about a node may live, which fields select Events, repeats
patched in place, and the discovery and Table documents ``kubectl get`` reads."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.fakes.kube_api import FakeKubeApi


@pytest.fixture
def core(kube_client: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(kube_client)


def _event(namespace: str, kind: str, name: str, involved_namespace: str | None, reason: str) -> k8s.CoreV1Event:
    return k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(generate_name=f"{name}.", namespace=namespace),
        involved_object=k8s.V1ObjectReference(kind=kind, name=name, namespace=involved_namespace, uid=name),
        reason=reason,
        message=f"{reason} of {name}",
        type="Normal",
        count=1,
        source=k8s.V1EventSource(component="leadtime"),
    )


@pytest.mark.parametrize("namespace", ["leadtime", "kube-system"])
def test_an_event_about_a_node_outside_default_is_invalid(core: k8s.CoreV1Api, namespace: str) -> None:
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_event(namespace, _event(namespace, "Node", "gpu-1", None, "Cordoned"))
    assert raised.value.status == 422
    assert "does not match event.namespace" in json.loads(raised.value.body)["message"]


def test_an_event_about_a_namespaced_object_must_be_in_its_namespace(core: k8s.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_event("default", _event("default", "ConfigMap", "state", "leadtime", "ScaleUp"))
    assert raised.value.status == 422
    made = core.create_namespaced_event("leadtime", _event("leadtime", "ConfigMap", "state", "leadtime", "ScaleUp"))
    assert made.metadata.name.startswith("state.")


def test_events_are_selected_by_the_fields_the_api_supports_and_patched_in_place(core: k8s.CoreV1Api) -> None:
    node = core.create_namespaced_event("default", _event("default", "Node", "gpu-1", None, "Cordoned"))
    core.create_namespaced_event("default", _event("default", "Node", "gpu-2", None, "Cordoned"))
    core.create_namespaced_event("leadtime", _event("leadtime", "ConfigMap", "state", "leadtime", "ScaleUp"))
    # what kubectl describe node asks for: across namespaces, by name, kind and uid
    found = core.list_event_for_all_namespaces(
        field_selector="involvedObject.name=gpu-1,involvedObject.kind=Node,involvedObject.uid=gpu-1"
    ).items
    assert [e.metadata.name for e in found] == [node.metadata.name]
    assert len(core.list_event_for_all_namespaces(field_selector="source=leadtime,reason=Cordoned").items) == 2
    with pytest.raises(ApiException) as raised:
        core.list_namespaced_event("default", field_selector="message=Cordoned of gpu-1")
    assert raised.value.status == 400
    core.patch_namespaced_event(node.metadata.name, "default", {"count": 2})
    assert [e.count for e in core.list_namespaced_event("default").items if e.metadata.name == node.metadata.name] == [
        2
    ]


def test_discovery_and_tables_for_kubectl(kube_api: FakeKubeApi, core: k8s.CoreV1Api) -> None:
    core.create_namespaced_event("default", _event("default", "Node", "gpu-1", None, "DrainFinished"))

    def get(path: str, accept: str = "application/json") -> dict[str, Any]:  # a JSON object
        request = urllib.request.Request(kube_api.url + path, headers={"Accept": accept})
        with urllib.request.urlopen(request, timeout=5) as answer:
            return dict(json.load(answer))

    assert get("/api")["versions"] == ["v1"]
    groups = {g["name"] for g in get("/apis")["groups"]}
    assert {"policy", "coordination.k8s.io", "events.k8s.io"} <= groups
    resources = {r["name"]: r for r in get("/api/v1")["resources"]}
    assert (resources["events"]["kind"], resources["nodes"]["namespaced"]) == ("Event", False)
    table = get("/api/v1/events", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert table["kind"] == "Table"
    names = [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0]
    assert names == ["Last Seen", "Type", "Reason", "Object", "Message"]
    (row,) = table["rows"]
    assert row["cells"][1:4] == ["Normal", "DrainFinished", "node/gpu-1"]
    assert kube_api.calls(resource="events") == 2  # discovery is not logged as a resource request
