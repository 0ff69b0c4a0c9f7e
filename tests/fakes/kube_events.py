"""What FakeKubeApi does for core/v1 Events and for API discovery, as the real API server does it.

Each behaviour below is a fact of the Kubernetes API the fake relies on, with its source:

1. An Event about a cluster-scoped object (``involvedObject.namespace`` empty, e.g. a Node) is accepted only in
   the ``default`` namespace (or none) when ``eventTime`` is unset, and only in ``default`` or ``kube-system``
   when it is set; an Event about a namespaced object must be in that object's namespace. Otherwise the create
   answers 422 Invalid, ``involvedObject.namespace: ... does not match event.namespace``.
   Source: kubernetes ``pkg/apis/core/validation/events.go`` (``legacyValidateEvent``).
2. Events can be selected by these fields only: ``metadata.name``, ``metadata.namespace``,
   ``involvedObject.{kind,namespace,name,uid,apiVersion,resourceVersion,fieldPath}``, ``reason``,
   ``reportingComponent``, ``source`` (``source.component``) and ``type``; any other field answers 400
   ``field label not supported``. Source: kubernetes ``pkg/registry/core/event/strategy.go``
   (``ToSelectableFields``) and ``pkg/apis/core/v1/conversion.go`` (the Event field label conversion).
3. A repeated Event is the same object patched (``count``, ``lastTimestamp``), not a new one: client-go's
   ``EventCorrelator`` (``tools/record/events_cache.go``) sends a strategic merge patch to the Event it created.
   The fake applies patches as JSON merge patches, which is the same for these scalar fields.
4. ``kubectl describe`` finds an object's Events by listing Events with the field selector
   ``involvedObject.name``, ``involvedObject.namespace``, ``involvedObject.kind`` and ``involvedObject.uid``
   (``kubectl/pkg/describe/describe.go``, ``searchEvents``); for a Node it also searches with the node name as
   the uid (the kubelet records its node Events that way) and across all namespaces.
5. Discovery: ``GET /api`` answers ``APIVersions``, ``GET /apis`` an ``APIGroupList``, ``GET /api/v1`` and
   ``GET /apis/<group>/<version>`` an ``APIResourceList`` (name, namespaced, kind, verbs). A client asking for
   aggregated discovery gets the legacy documents and falls back to them, as against a server without it.
   Source: Kubernetes API reference, "API discovery" (kubernetes.io/docs/concepts/overview/kubernetes-api/).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

EVENT_FIELDS = {
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
}
_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def event_namespace_problem(namespace: str, event: Obj) -> str | None:
    """Fact 1: why the API server would refuse this core/v1 Event in ``namespace``, or None."""
    involved = event.get("involvedObject") or {}
    involved_namespace = involved.get("namespace") or ""
    if not involved_namespace:
        allowed = ("default", "kube-system") if event.get("eventTime") else ("", "default")
        ok = namespace in allowed
    else:
        ok = namespace == involved_namespace
    if ok:
        return None
    return (
        f'Event "{(event.get("metadata") or {}).get("name", "")}" is invalid: involvedObject.namespace: '
        f'Invalid value: "{involved_namespace}": does not match event.namespace'
    )


def event_field_selector_problem(selector: str) -> str | None:
    """Fact 2: the first field of ``selector`` Events cannot be selected by, or None."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        field = term.split("!=")[0].split("=")[0]
        if field not in EVENT_FIELDS:
            return f'"{field}" is not a known field selector: only "{", ".join(sorted(EVENT_FIELDS))}"'
    return None


def event_field_value(event: Obj, field: str) -> str:
    """Fact 2: the value an Event field selector compares (``source`` is ``source.component``)."""
    if field == "source":
        return str((event.get("source") or {}).get("component") or event.get("reportingComponent") or "")
    value: Any = event
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def discovery(path: str, resources: dict[tuple[str, str], tuple[str, str, bool]]) -> Obj | None:
    """Fact 5: the discovery document at ``path`` for the served ``resources``, or None when not discovery."""
    versions: dict[str, list[tuple[str, str, bool]]] = {}
    for (_, resource), (kind, api_version, namespaced) in resources.items():
        versions.setdefault(api_version, []).append((resource, kind, namespaced))
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if path == "/apis":
        groups = sorted({v.split("/")[0] for v in versions if "/" in v})
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": group,
                    "versions": [{"groupVersion": f"{group}/v1", "version": "v1"}],
                    "preferredVersion": {"groupVersion": f"{group}/v1", "version": "v1"},
                }
                for group in groups
            ],
        }
    group_version = path.removeprefix("/api/") if path.startswith("/api/") else path.removeprefix("/apis/")
    if path.startswith(("/api/", "/apis/")) and group_version in versions:
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": [
                {
                    "name": resource,
                    "singularName": kind.lower(),
                    "namespaced": namespaced,
                    "kind": kind,
                    "verbs": _VERBS,
                }
                for resource, kind, namespaced in sorted(versions[group_version])
            ],
        }
    return None
