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
6. A list whose request accepts ``application/json;as=Table;v=v1;g=meta.k8s.io`` (``kubectl get`` sends it) is
   answered as a ``meta.k8s.io/v1`` ``Table``: column definitions and one row of cells per object, with the
   object itself. For Events the columns are Last Seen, Type, Reason, Object (``kind/name``, kind in lower
   case), Message, and at priority 1 Subobject, Source, First Seen, Count, Name. Sources: "Receiving resources
   as Tables" (kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables) and
   kubernetes ``pkg/printers/internalversion/printers.go`` (``eventColumnDefinitions``, ``printEvent``); ages
   are printed as kubectl's ``duration.HumanDuration`` does, coarsened here to s, m, h or d.
"""

from __future__ import annotations

from datetime import datetime
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


_EVENT_COLUMNS = [
    ("Last Seen", 0),
    ("Type", 0),
    ("Reason", 0),
    ("Object", 0),
    ("Subobject", 1),
    ("Source", 1),
    ("Message", 0),
    ("First Seen", 1),
    ("Count", 1),
    ("Name", 1),
]


def wants_table(headers: dict[str, str]) -> bool:
    """Fact 6: the request accepts a server-side Table."""
    return "as=Table" in headers.get("accept", "")


def event_table(listed: Obj, now: datetime) -> Obj:
    """Fact 6: an EventList as the Table the API server prints for ``kubectl get events``."""
    rows = []
    for event in listed["items"]:
        involved = event.get("involvedObject") or {}
        source = event.get("source") or {}
        cells = [
            _age(event.get("lastTimestamp"), now),
            event.get("type", ""),
            event.get("reason", ""),
            f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
            involved.get("fieldPath", ""),
            ", ".join(filter(None, (source.get("component"), source.get("host")))),
            str(event.get("message", "")).strip(),
            _age(event.get("firstTimestamp"), now),
            int(event.get("count") or 1),
            event["metadata"]["name"],
        ]
        rows.append({"cells": cells, "object": event})
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(listed.get("metadata") or {}),
        "columnDefinitions": [
            {
                "name": name,
                "type": "integer" if name == "Count" else "string",
                "format": "",
                "description": "",
                "priority": priority,
            }
            for name, priority in _EVENT_COLUMNS
        ],
        "rows": rows,
    }


def _age(stamp: str | None, now: datetime) -> str:
    if not stamp:
        return "<unknown>"
    seconds = max(0, int((now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
