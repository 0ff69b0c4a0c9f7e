"""FakeKubeApi: a small in-process HTTP server that speaks the Kubernetes REST protocol for what the agent uses.

The real ``kubernetes`` client is pointed at it (``Configuration.host = fake.url``). It serves nodes, pods (with
the Eviction subresource refusing with 429 when a PodDisruptionBudget would be violated, and with 500 when more
than one selects the pod), PodDisruptionBudgets, Leases (409 Conflict on a stale resourceVersion), ConfigMaps and
Events. Every request is logged as an RBAC tuple (verb, API group, resource, subresource, namespace, name), and
faults can be injected: the next N matching calls fail with a chosen status, or the server stops accepting
connections and later restarts on the same port.

A paged list's ``continue`` token carries the list's resourceVersion and expires when the history behind it is
compacted (``compact()``, which the API server does every 5 minutes by default): a list continued with it answers
410 Gone, reason ``Expired``, with an inconsistent token in its ``metadata.continue``, as the API server does.
``compact_before_continued_lists(n)`` compacts just before each of the next ``n`` continued lists arrive.

An accepted eviction deletes the pod gracefully, as the API server does: a pod on a node gets
``metadata.deletionTimestamp`` (the eviction's time plus its grace period, ``spec.terminationGracePeriodSeconds``,
30 when unset) and ``deletionGracePeriodSeconds``, and stays listed (Terminating) until its kubelet finishes it.
The fake's kubelets finish a terminating pod when ``clock()`` reaches its ``deletionTimestamp`` (``clock`` is wall
time unless a test hands the fake its own, e.g. a ``SimulatedClock``'s ``now``); a grace period of 0, a pod on
no node and a finished pod are deleted at once. ``finish_terminating`` ends terminations now, and
``stop_kubelet(node)`` stands for a node whose kubelet is gone: its pods stay Terminating.

Simplifications, on purpose: strategic-merge patches are applied as JSON merge patches (lists are replaced),
a PDB counts running, non-deleted pods as healthy (no readiness), and its expected pod count is
``status.expectedPods`` when a test sets it (the owning controller's scale), else the number of matching pods.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.http_server import LocalJsonServer
from tests.fakes.kube_events import (
    discovery,
    event_field_selector_problem,
    event_field_value,
    event_namespace_problem,
    event_table,
    wants_table,
)

Obj = dict[str, Any]
DEFAULT_TERMINATION_GRACE_SECONDS = 30  # the API server's default for spec.terminationGracePeriodSeconds
MULTIPLE_PDBS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
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


class FakeKubeApi(LocalJsonServer):
    """The fake API server. Seed objects with ``put``; read them back with ``get``; inspect ``requests``."""

    name = "fake-kube"

    def __init__(self, port: int = 0, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__(port)
        self._objects: dict[tuple[str, str, str, str], Obj] = {}  # (group, resource, namespace, name)
        self._version = 0
        self._compacted = 0  # resourceVersions below this are compacted: continue tokens from them have expired
        self._compact_before_continued = 0
        self._faults: list[_Fault] = []
        self._kubelets_down: set[str] = set()
        self.requests: list[RequestRecord] = []
        # The cluster's time: when evictions are stamped and terminating pods finish. Wall time unless a test
        # sets its own (``kube_api.clock = simulated_clock.now``).
        self.clock: Callable[[], datetime] = clock or (lambda: datetime.now(UTC))

    def start(self) -> FakeKubeApi:
        super().start()
        return self

    # -- fault injection and inspection ----------------------------------------------------------------------
    def fail_next(
        self, count: int = 1, status: int = 500, *, verb: str | None = None, resource: str | None = None
    ) -> None:
        """The next ``count`` requests matching ``verb``/``resource`` (any when None) answer ``status``."""

        def matches(rec: RequestRecord) -> bool:
            return (verb is None or rec.verb == verb) and (resource is None or rec.resource == resource)

        with self._lock:
            self._faults.append(_Fault(count, status, matches))

    def compact(self) -> None:
        """The API server compacts its history now (its compactor writes a key, a revision of its own): every
        continue token issued so far has expired."""
        with self._lock:
            self._version += 1
            self._compacted = self._version

    def compact_before_continued_lists(self, count: int = 1) -> None:
        """The next ``count`` list requests that carry a continue token each arrive just after a compaction."""
        with self._lock:
            self._compact_before_continued += count

    def calls(self, verb: str | None = None, resource: str | None = None, subresource: str | None = None) -> int:
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (verb is None or r.verb == verb)
                and (resource is None or r.resource == resource)
                and (subresource is None or r.subresource == subresource)
            )

    # -- the kubelets: how terminating pods end ---------------------------------------------------------------
    def finish_terminating(self, namespace: str | None = None, name: str | None = None) -> list[str]:
        """The kubelets finish terminating pods now (those matching ``namespace``/``name``; all when None), even
        on a node whose kubelet is stopped; answers the names of the pods removed."""
        with self._lock:
            done = [
                key
                for key, pod in self._objects.items()
                if key[:2] == ("", "pods")
                and pod["metadata"].get("deletionTimestamp")
                and namespace in (None, key[2])
                and name in (None, key[3])
            ]
            for key in done:
                del self._objects[key]
            return [key[3] for key in done]

    def stop_kubelet(self, node: str) -> None:
        """The node's kubelet is gone: its terminating pods are never finished (until ``finish_terminating``)."""
        with self._lock:
            self._kubelets_down.add(node)

    def _reap(self) -> None:
        """Remove the terminating pods whose kubelet has finished them: it is up and their time has come."""
        now = self.clock()
        for key, pod in list(self._objects.items()):
            stamp = pod["metadata"].get("deletionTimestamp") if key[:2] == ("", "pods") else None
            if stamp and (pod.get("spec") or {}).get("nodeName") not in self._kubelets_down and now >= _time(stamp):
                del self._objects[key]

    # -- direct object access for tests ----------------------------------------------------------------------
    def put(self, resource: str, obj: Obj, group: str = "") -> Obj:
        """Create or overwrite an object as the cluster would hold it (no request is logged)."""
        kind, api_version, _ = RESOURCES[(group, resource)]
        with self._lock:
            obj = copy.deepcopy(obj)
            obj.setdefault("kind", kind)
            obj.setdefault("apiVersion", api_version)
            meta = obj.setdefault("metadata", {})
            key = (group, resource, meta.get("namespace", ""), meta["name"])
            self._stamp(meta, new=key not in self._objects)
            self._objects[key] = obj
            return copy.deepcopy(obj)

    def get(self, resource: str, name: str, namespace: str = "", group: str = "") -> Obj | None:
        with self._lock:
            self._reap()
            found = self._objects.get((group, resource, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def list(self, resource: str, group: str = "", namespace: str | None = None) -> list[Obj]:
        with self._lock:
            self._reap()
            return [
                copy.deepcopy(o)
                for (g, r, ns, _), o in sorted(self._objects.items())
                if g == group and r == resource and (namespace is None or ns == namespace)
            ]

    def delete(self, resource: str, name: str, namespace: str = "", group: str = "") -> None:
        with self._lock:
            self._objects.pop((group, resource, namespace, name), None)

    # -- request handling (called from server threads) --------------------------------------------------------
    def respond(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> tuple[int, Obj]:
        content_type = headers.get("content-type", "")
        parts = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if method == "GET" and (document := discovery(parts.path, RESOURCES)) is not None:
            return 200, document  # discovery is not a resource request: not logged for RBAC
        match = _PATH.match(parts.path)
        if match is None:
            return 404, ApiError(
                404, "NotFound", f"the server could not find the requested resource {parts.path}"
            ).status()
        group = match["group"] or ""
        resource, name, sub, namespace = match["resource"], match["name"] or "", match["sub"] or "", match["ns"] or ""
        record = RequestRecord(_verb(method, name, query), group, resource, sub, namespace, name)
        with self._lock:
            self.requests.append(record)
            fault = next((f for f in self._faults if f.remaining > 0 and f.matches(record)), None)
            if fault is not None:
                fault.remaining -= 1
                error = ApiError(
                    fault.status, "InternalError" if fault.status >= 500 else "TooManyRequests", "injected fault"
                )
                return fault.status, error.status()
            try:
                self._reap()
                if (group, resource) not in RESOURCES:
                    raise ApiError(404, "NotFound", f"the server could not find the requested resource ({resource})")
                payload = json.loads(body) if body else None
                status, answer = self._dispatch(record, query, content_type, payload)
                if record.verb == "list" and (group, resource) == ("", "events") and wants_table(headers):
                    return status, event_table(answer, datetime.now(UTC))
                return status, answer
            except ApiError as exc:
                return exc.code, exc.status()

    def _dispatch(self, rec: RequestRecord, query: dict[str, str], content_type: str, payload: Any) -> tuple[int, Obj]:
        key = (rec.api_group, rec.resource, rec.namespace, rec.name)
        if rec.subresource == "eviction" and rec.resource == "pods" and rec.verb == "create":
            return self._evict(rec.namespace, rec.name)
        if rec.subresource not in ("", "status"):
            raise ApiError(404, "NotFound", f"subresource {rec.subresource!r} is not served by this fake")
        if rec.verb == "list":
            return 200, self._list(rec, query)
        if rec.verb == "create":
            return 201, self._create(rec, payload)
        current = self._objects.get(key)
        if current is None:
            kind = RESOURCES[(rec.api_group, rec.resource)][0]
            raise ApiError(404, "NotFound", f'{rec.resource} "{rec.name}" not found', {"name": rec.name, "kind": kind})
        if rec.verb == "get":
            return 200, copy.deepcopy(current)
        if rec.verb == "delete":
            del self._objects[key]
            return 200, copy.deepcopy(current)
        if rec.verb == "update":
            return 200, self._write(key, current, payload)
        if rec.verb == "patch":
            return 200, self._write(key, current, _apply_patch(current, payload, content_type))
        raise ApiError(405, "MethodNotAllowed", f"{rec.verb} is not supported on {rec.resource}")

    def _list(self, rec: RequestRecord, query: dict[str, str]) -> Obj:
        kind, api_version, _ = RESOURCES[(rec.api_group, rec.resource)]
        is_event = (rec.api_group, rec.resource) == ("", "events")
        if is_event and (problem := event_field_selector_problem(query.get("fieldSelector", ""))):
            raise ApiError(400, "BadRequest", problem)
        items = [
            copy.deepcopy(o)
            for (g, r, ns, _), o in sorted(self._objects.items())
            if g == rec.api_group and r == rec.resource and (not rec.namespace or ns == rec.namespace)
            if label_selector_matches(query.get("labelSelector", ""), o["metadata"].get("labels") or {})
            and field_selector_matches(query.get("fieldSelector", ""), o, event_field_value if is_event else None)
        ]
        start = self._continue_from(query.get("continue") or "")
        limit = int(query.get("limit") or 0) or len(items)
        page, more = items[start : start + limit], start + limit < len(items)
        meta = {"resourceVersion": str(self._version)}
        if more:
            meta["continue"] = _continue_token(self._version, start + limit)
        return {"kind": f"{kind}List", "apiVersion": api_version, "metadata": meta, "items": page}

    def _continue_from(self, token: str) -> int:
        """Where a list continued with ``token`` starts; 410 Expired when the token's resourceVersion has been
        compacted (with a token that continues from the same place, inconsistently, at the current version)."""
        if not token:
            return 0
        if self._compact_before_continued > 0:
            self._compact_before_continued -= 1
            self._version += 1
            self._compacted = self._version
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            version, start = int(decoded["rv"]), int(decoded["start"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise ApiError(400, "BadRequest", f"continue key is not valid: {token!r}") from None
        if 0 < version < self._compacted:
            raise ApiError(410, "Expired", CONTINUE_EXPIRED, metadata={"continue": _continue_token(0, start)})
        return start

    def _create(self, rec: RequestRecord, payload: Obj) -> Obj:
        kind, api_version, namespaced = RESOURCES[(rec.api_group, rec.resource)]
        _check_micro_times(rec.resource, payload)
        meta = payload.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if namespaced:
            meta["namespace"] = rec.namespace
        if (rec.api_group, rec.resource) == ("", "events") and (
            problem := event_namespace_problem(rec.namespace, payload)
        ):
            raise ApiError(422, "Invalid", problem)
        key = (rec.api_group, rec.resource, rec.namespace, meta.get("name", ""))
        if key in self._objects:
            raise ApiError(409, "AlreadyExists", f'{rec.resource} "{key[3]}" already exists', {"name": key[3]})
        payload.update(kind=kind, apiVersion=api_version)
        self._stamp(meta, new=True)
        self._objects[key] = payload
        return copy.deepcopy(payload)

    def _write(self, key: tuple[str, str, str, str], current: Obj, new: Obj) -> Obj:
        _check_micro_times(key[1], new)
        sent = (new.get("metadata") or {}).get("resourceVersion")
        if sent and sent != current["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {key[1]} "{key[3]}": the object has been modified; '
                "please apply your changes to the latest version and try again",
                {"name": key[3], "kind": key[1]},
            )
        meta = new.setdefault("metadata", {})
        for kept in ("name", "namespace", "uid", "creationTimestamp"):
            if kept in current["metadata"]:
                meta[kept] = current["metadata"][kept]
        new.update(kind=current["kind"], apiVersion=current["apiVersion"])
        self._stamp(meta, new=False)
        self._objects[key] = new
        return copy.deepcopy(new)

    def _stamp(self, meta: Obj, new: bool) -> None:
        self._version += 1
        meta["resourceVersion"] = str(self._version)
        if new:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _stamp_time(datetime.now(UTC)))

    # -- the Eviction subresource -----------------------------------------------------------------------------
    def _evict(self, namespace: str, name: str) -> tuple[int, Obj]:
        """The Eviction subresource: a pod that is finished, Pending or already terminating is deleted without
        looking at budgets; otherwise more than one covering PDB is a 500, a PDB that allows no disruption a 429,
        and an allowed eviction deletes the pod gracefully."""
        key = ("", "pods", namespace, name)
        pod = self._objects.get(key)
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})
        phase = (pod.get("status") or {}).get("phase")
        if phase not in ("Succeeded", "Failed", "Pending") and not pod["metadata"].get("deletionTimestamp"):
            pdbs = list(self._pdbs_covering(pod))
            if len(pdbs) > 1:
                raise ApiError(500, "", MULTIPLE_PDBS)
            for pdb in pdbs:
                allowed, healthy, desired = self._disruptions_allowed(pdb)
                if allowed < 1 and not (not _is_healthy(pod) and 0 < desired <= healthy):
                    pdb_name = pdb["metadata"]["name"]
                    raise ApiError(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        {
                            "causes": [
                                {
                                    "reason": "DisruptionBudget",
                                    "message": f"The disruption budget {pdb_name} needs {desired} healthy pods "
                                    f"and has {healthy} currently",
                                }
                            ]
                        },
                    )
        self._delete_gracefully(key, pod)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _delete_gracefully(self, key: tuple[str, str, str, str], pod: Obj) -> None:
        """A DELETE of the pod without options: its own grace period, 0 for a pod on no node or a finished one;
        0 deletes at once, else the pod is marked and left to its kubelet; a pod already terminating is left as
        it is."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if meta.get("deletionTimestamp"):
            return
        grace = spec.get("terminationGracePeriodSeconds")
        grace = DEFAULT_TERMINATION_GRACE_SECONDS if grace is None else max(int(grace), 0)
        if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            grace = 0
        if grace == 0:
            del self._objects[key]
            return
        meta["deletionTimestamp"] = _stamp_time(self.clock() + timedelta(seconds=grace), round_up=True)
        meta["deletionGracePeriodSeconds"] = grace
        self._stamp(meta, new=False)

    def _pdbs_covering(self, pod: Obj) -> Iterator[Obj]:
        labels = pod["metadata"].get("labels") or {}
        for (g, r, ns, _), pdb in self._objects.items():
            if (g, r, ns) == ("policy", "poddisruptionbudgets", pod["metadata"]["namespace"]):
                selector = (pdb.get("spec") or {}).get("selector") or {}
                # an empty selector matches no pod here (the eviction subresource's own rule)
                if (selector.get("matchLabels") or selector.get("matchExpressions")) and selector_object_matches(
                    selector, labels
                ):
                    yield pdb

    def _disruptions_allowed(self, pdb: Obj) -> tuple[int, int, int]:
        """(disruptions allowed, healthy pods, desired healthy) for a PDB, counting matching pods directly."""
        spec, ns = pdb.get("spec") or {}, pdb["metadata"]["namespace"]
        selector = spec.get("selector") or {}
        pods = [
            p
            for (g, r, pns, _), p in self._objects.items()
            if (g, r, pns) == ("", "pods", ns) and selector_object_matches(selector, p["metadata"].get("labels") or {})
        ]
        # The disruption controller takes the expected count from the owning controller's scale; a test sets it
        # as status.expectedPods (pods evicted and not yet replaced still count), else the matching pods count.
        expected = (pdb.get("status") or {}).get("expectedPods", len(pods))
        healthy = sum(1 for p in pods if _is_healthy(p))
        if spec.get("maxUnavailable") is not None:
            desired = expected - _scaled(spec["maxUnavailable"], expected, round_up=True)
        else:
            desired = _scaled(spec.get("minAvailable", 1), expected, round_up=True)
        return healthy - max(desired, 0), healthy, max(desired, 0)


def _scaled(value: int | str, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * total / 100
        return int(-(-exact // 1)) if round_up else int(exact)
    return int(value)


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


# -- selectors and patches ----------------------------------------------------------------------------------------
_REQUIREMENT = re.compile(r"\s*(!?)([\w./-]+)\s*(?:(==|=|!=)\s*([\w./-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*(?:,|$)")


def label_selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """A label selector string (``a=b,c!=d,e in (x,y),f notin (z),g,!h``) against a label map."""
    pos = 0
    while pos < len(selector):
        req = _REQUIREMENT.match(selector, pos)
        if req is None or req.end() == pos:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {selector[pos:]!r}")
        pos = req.end()
        negate, key, op, value, set_op, values = req.groups()
        if op:
            if (labels.get(key) == value) == (op == "!="):
                return False
        elif set_op:
            choices = {v.strip() for v in values.split(",")}
            if (labels.get(key) in choices) != (set_op == "in"):
                return False
        elif (key in labels) == bool(negate):
            return False
    return True


def selector_object_matches(selector: Obj, labels: dict[str, str]) -> bool:
    """A LabelSelector object (matchLabels, matchExpressions) against a label map."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], set(expr.get("values") or [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def field_selector_matches(selector: str, obj: Obj, value_of: Callable[[Obj, str], str] | None = None) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        path, op, value = re.split(r"(!=|==|=)", term, maxsplit=1)
        actual: Any = obj
        for part in path.split("."):
            actual = actual.get(part) if isinstance(actual, dict) else None
        if value_of is not None:
            actual = value_of(obj, path)
        if (str(actual if actual is not None else "") == value) == (op == "!="):
            return False
    return True


def _apply_patch(current: Obj, patch: Any, content_type: str) -> Obj:
    if content_type.startswith("application/json-patch+json"):
        return _json_patch(copy.deepcopy(current), patch)
    if content_type.split(";", maxsplit=1)[0] in (
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ):
        merged: Obj = _merge(copy.deepcopy(current), patch)
        return merged
    raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}")


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch)
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target


def _json_patch(doc: Obj, ops: list[Obj]) -> Obj:
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if op["op"] in ("add", "replace"):
            if isinstance(node, list):
                node.insert(len(node) if last == "-" else int(last), op["value"])
            else:
                node[last] = op["value"]
        elif op["op"] == "remove":
            del node[int(last) if isinstance(node, list) else last]
        else:
            raise ApiError(422, "Invalid", f"json patch operation {op['op']!r} is not supported by this fake")
    return doc


_MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")


def _check_micro_times(resource: str, obj: Obj) -> None:
    """A Lease's renewTime and acquireTime are MicroTime, decoded with the fixed layout
    ``2006-01-02T15:04:05.000000Z07:00``: anything else (a whole second without its six digits) is refused."""
    if resource != "leases":
        return
    for field in ("renewTime", "acquireTime"):
        value = (obj.get("spec") or {}).get(field)
        if value is not None and not _MICRO_TIME.fullmatch(str(value)):
            raise ApiError(
                400, "BadRequest", f'Lease in version "v1" cannot be handled as a Lease: parsing time "{value}"'
            )
