"""The fake Kubernetes API server's REST vocabulary and its store: the resources it serves, a request in RBAC
terms, a Status error, continue tokens and timestamps as the API server writes them, and ``ObjectStore``, the objects
held and the resourceVersion each write stamps."""

from __future__ import annotations

import base64
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

Obj = dict[str, Any]
# apiserver storage/etcd3/errors.go (inconsistentContinue), answered with 410 Expired for a compacted continue token
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)

# (api group, resource) -> (kind, apiVersion, namespaced)
RESOURCES: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("", "nodes"): ("Node", "v1", False),
    ("", "pods"): ("Pod", "v1", True),
    ("", "configmaps"): ("ConfigMap", "v1", True),
    ("", "events"): ("Event", "v1", True),
    ("policy", "poddisruptionbudgets"): ("PodDisruptionBudget", "policy/v1", True),
    ("coordination.k8s.io", "leases"): ("Lease", "coordination.k8s.io/v1", True),
    ("events.k8s.io", "events"): ("Event", "events.k8s.io/v1", True),
}
_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


@dataclass(frozen=True)
class RequestRecord:
    """One request in RBAC terms; an eviction is ``RequestRecord("create", "", "pods", "eviction", ns, pod)``."""

    verb: str
    api_group: str
    resource: str
    subresource: str
    namespace: str
    name: str


@dataclass
class _Fault:
    remaining: int
    status: int
    matches: Callable[[RequestRecord], bool]


class ApiError(Exception):
    def __init__(
        self, code: int, reason: str, message: str, details: Obj | None = None, metadata: Obj | None = None
    ) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}
        self.metadata = metadata or {}

    def status(self) -> Obj:
        status: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": dict(self.metadata), "status": "Failure"}
        status["message"] = self.message
        if self.reason:  # omitted when empty, like the API server's Status
            status["reason"] = self.reason
        if self.details:
            status["details"] = self.details
        status["code"] = self.code
        return status


class ObjectStore:
    """The objects the fake holds, keyed (group, resource, namespace, name); ``FakeKubeApi`` sets them up."""

    _objects: dict[tuple[str, str, str, str], Obj]
    _version: int
    _lock: threading.RLock
    # The cluster's time: when evictions are stamped and terminating pods finish.
    clock: Callable[[], datetime]

    def _stamp(self, meta: Obj, new: bool) -> None:
        self._version += 1
        meta["resourceVersion"] = str(self._version)
        if new:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _stamp_time(datetime.now(UTC)))


def _continue_token(version: int, start: int) -> str:
    """An opaque continue token, shaped like the API server's (base64 of JSON with the list's resourceVersion and
    where the next page starts; a version of 0 continues at the current one, as an inconsistent token does)."""
    return base64.urlsafe_b64encode(json.dumps({"rv": version, "start": start}).encode()).decode()


def _stamp_time(moment: datetime, round_up: bool = False) -> str:
    """RFC 3339 to the second, as the API server writes timestamps; ``round_up`` never moves a deadline earlier."""
    if round_up and moment.microsecond:
        moment += timedelta(seconds=1)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _is_healthy(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def _verb(method: str, name: str, query: dict[str, str]) -> str:
    if method == "GET":
        return "get" if name else ("watch" if query.get("watch") in ("true", "1") else "list")
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
