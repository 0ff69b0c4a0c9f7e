"""``FakeKubeApi``, the fake Kubernetes API server the real client talks to: injected faults and the request log,
compaction of list history, direct object access for tests, and each request's dispatch (lists and their continue
tokens, creates, updates, patches, deletes; evictions in ``evictions``)."""

from __future__ import annotations

import base64
import binascii
import copy
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.http_server import LocalJsonServer
from tests.fakes.kube_api.evictions import Evictions
from tests.fakes.kube_api.patches import _apply_patch, _check_micro_times
from tests.fakes.kube_api.selectors import field_selector_matches, label_selector_matches
from tests.fakes.kube_api.store import (
    _PATH,
    CONTINUE_EXPIRED,
    RESOURCES,
    ApiError,
    Obj,
    RequestRecord,
    _continue_token,
    _Fault,
    _verb,
)
from tests.fakes.kube_events import (
    discovery,
    event_field_selector_problem,
    event_field_value,
    event_namespace_problem,
    event_table,
    wants_table,
)


class FakeKubeApi(Evictions, LocalJsonServer):
    """The fake API server. Seed objects with ``put``; read them back with ``get``; inspect ``requests``."""

    name = "fake-kube"

    def __init__(self, port: int = 0, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__(port)
        self._objects: dict[tuple[str, str, str, str], Obj] = {}  # (group, resource, namespace, name)
        self._version = 0
        self._compacted = 0  # resourceVersions below this are compacted: continue tokens from them have expired
        self._compact_before_continued = 0
        self._faults: list[_Fault] = []
        self._kubelets_down: dict[str, datetime] = {}  # node -> when its kubelet stopped (``stop_kubelet``)
        self._pods_hung: set[str] = set()  # nodes whose live kubelet cannot finish its pods (``hang_pods``)
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
