"""FakeTpuApi: Cloud TPU v2 queued resources and their long-running operations, for the real ``TpuClient``.

Served (REST transport, ``api_endpoint`` = ``fake.url``):

    GET    /v2/projects/P/locations/L/queuedResources             list, paged (pageSize, pageToken)
    POST   /v2/projects/P/locations/L/queuedResources?queuedResourceId=ID&requestId=R    create (an LRO)
    GET    /v2/projects/P/locations/L/queuedResources/ID          get
    DELETE /v2/projects/P/locations/L/queuedResources/ID[?force=true]                   delete (an LRO)
    GET    /v2/projects/P/locations/L/operations[/OP]             list / get operations

A repeated ``requestId`` returns the first operation (Google's idempotency). A created queued resource gets its
``createTime`` from ``clock`` (wall time unless a test gives its own, e.g. a ``SimulatedClock``'s ``now``) and keeps
the ``queueingPolicy`` it was sent. ``advance()`` is the passing of lead time: operations finish,
WAITING_FOR_RESOURCES becomes PROVISIONING (unless the accelerator type is stocked out), PROVISIONING becomes
ACTIVE, DELETING ones go away. ``stockout(mode, accelerator_type)`` (every type unless one is named): "wait" is the
zone without capacity: requests stay WAITING_FOR_RESOURCES, and one whose ``queueingPolicy`` sets a valid-until
time (``validUntilDuration`` from its ``createTime``, or ``validUntilTime``) becomes FAILED on the first
``advance()`` once ``clock`` has reached it, as the service fails a request that expired; a request without one
waits for ever; no mode fails a request sooner, as the service does not. "http" refuses the create call with a
quota error (HTTP 429 RESOURCE_EXHAUSTED). ``set_state`` puts a queued resource in any state (e.g. SUSPENDED after a
spot preemption), a FAILED one with the error given, its message possibly empty.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tests.fakes.google_api import GoogleApiError, GoogleJsonServer, Obj

STOCKOUT_MESSAGE = "There is no more capacity in the zone; stockout (GCE_STOCKOUT)"
QUOTA_MESSAGE = "Quota 'TPUV5sLitepodPerProjectPerZoneForTPUAPI' exhausted. Limit 16 in zone us-central2-b"
# The service's words for an expired request are not documented: this message is the fake's own.
EXPIRED_MESSAGE = "The queued resource request expired: its valid-until time passed before resources were available"
STOCKOUT_MODES = ("wait", "http")
_OPERATION_METADATA = "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata"
_QUEUED_RESOURCE = "type.googleapis.com/google.cloud.tpu.v2.QueuedResource"


@dataclass
class _Operation:
    name: str
    target: str
    done: bool = False
    result: Obj | None = None


class FakeTpuApi(GoogleJsonServer):
    name = "fake-tpu"

    def __init__(self, project: str = "test-project", location: str = "us-central2-b") -> None:
        super().__init__()
        self.project, self.location = project, location
        self.queued: dict[str, Obj] = {}  # id -> QueuedResource JSON
        self.operations: dict[str, _Operation] = {}
        self.stockout_mode: str | None = None
        self.stocked_out: str | None = None  # the accelerator type stocked out; None: every type
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self._by_request_id: dict[str, str] = {}
        self._ids = itertools.count(1)

    def start(self) -> FakeTpuApi:
        super().start()
        return self

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.location}"

    def stockout(self, mode: str = "wait", accelerator_type: str | None = None) -> None:
        if mode not in STOCKOUT_MODES:
            raise ValueError(f"stockout mode {mode!r}: one of {', '.join(STOCKOUT_MODES)}")
        with self._lock:
            self.stockout_mode, self.stocked_out = mode, accelerator_type

    def restock(self) -> None:
        with self._lock:
            self.stockout_mode, self.stocked_out = None, None

    def set_state(
        self, qr_id: str, state: str, error: str | None = None, code: int = 8, initiator: str | None = None
    ) -> None:
        """A FAILED one carries ``failedData.error``, a ``google.rpc.Status`` of gRPC ``code`` (8 RESOURCE_EXHAUSTED
        unless told) and ``error`` as its message (``STOCKOUT_MESSAGE`` unless told): "" is an error without a message,
        which the JSON mapping leaves out, as it does every empty string. ``initiator`` ("USER" or "SERVICE") is the
        state's ``stateInitiator``, left out unless given (its zero value, STATE_INITIATOR_UNSPECIFIED)."""
        with self._lock:
            qr = self.queued[qr_id]
            qr["state"] = {"state": state, **({"stateInitiator": initiator} if initiator else {})}
            if state == "FAILED":
                message = STOCKOUT_MESSAGE if error is None else error
                qr["state"]["failedData"] = {"error": {"code": code, **({"message": message} if message else {})}}

    def state_of(self, qr_id: str) -> str | None:
        with self._lock:
            return self.queued[qr_id]["state"]["state"] if qr_id in self.queued else None

    def advance(self) -> None:
        with self._lock:
            for qr_id, qr in list(self.queued.items()):
                state = qr["state"]["state"]
                if state == "DELETING":
                    del self.queued[qr_id]
                elif state == "PROVISIONING":
                    qr["state"] = {"state": "ACTIVE"}
                elif state == "WAITING_FOR_RESOURCES" and not self._out_of(qr):
                    qr["state"] = {"state": "PROVISIONING"}
                elif state == "WAITING_FOR_RESOURCES" and _expired(qr, self.clock()):
                    self.set_state(qr_id, "FAILED", EXPIRED_MESSAGE)
            for op in self.operations.values():
                if not op.done:
                    op.done = True
                    resource = self.queued.get(op.target.rsplit("/", 1)[1])
                    op.result = (
                        {"@type": _QUEUED_RESOURCE, **resource}
                        if resource
                        else {"@type": "type.googleapis.com/google.protobuf.Empty"}
                    )

    # -- HTTP -----------------------------------------------------------------------------------------------------
    def route(self, method: str, path: str, query: dict[str, str], body: Obj) -> Obj:
        base = f"/v2/{self.parent}"
        if path == f"{base}/queuedResources" and method == "GET":
            return self._list(query)
        if path == f"{base}/queuedResources" and method == "POST":
            return self._create(query, body)
        if path.startswith(f"{base}/queuedResources/"):
            qr_id = path.rsplit("/", 1)[1]
            if qr_id not in self.queued:
                raise GoogleApiError(404, f"Resource '{self.parent}/queuedResources/{qr_id}' was not found")
            if method == "GET":
                return self.queued[qr_id]
            if method == "DELETE":
                return self._delete(qr_id, query.get("force") == "true")
        if path == f"{base}/operations" and method == "GET":
            return {"operations": [self._operation_json(op) for op in self.operations.values()]}
        if path.startswith(f"{base}/operations/") and method == "GET":
            name = path.removeprefix("/v2/")
            if name not in self.operations:
                raise GoogleApiError(404, f"Operation {name} was not found")
            return self._operation_json(self.operations[name])
        raise GoogleApiError(404, f"unknown path {path}")

    def _list(self, query: dict[str, str]) -> Obj:
        items = list(self.queued.values())
        start, size = int(query.get("pageToken") or 0), int(query.get("pageSize") or 50)
        out: Obj = {"queuedResources": items[start : start + size]}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return out

    def _create(self, query: dict[str, str], body: Obj) -> Obj:
        request_id = query.get("requestId", "")
        if request_id and request_id in self._by_request_id:
            return self._operation_json(self.operations[self._by_request_id[request_id]])
        qr_id = query.get("queuedResourceId", "")
        if qr_id in self.queued:
            raise GoogleApiError(409, f"Resource '{self.parent}/queuedResources/{qr_id}' already exists")
        if self.stockout_mode == "http" and self._out_of(body):
            raise GoogleApiError(429, QUOTA_MESSAGE)
        name = f"{self.parent}/queuedResources/{qr_id}"
        created = self.clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        state = {"state": "WAITING_FOR_RESOURCES"}
        self.queued[qr_id] = {**body, "name": name, "createTime": created, "state": state}
        return self._start(name, request_id)

    def _out_of(self, qr: Obj) -> bool:
        """Whether the zone has no capacity for this queued resource (its node's accelerator type)."""
        if self.stockout_mode is None:
            return False
        types = {spec.get("node", {}).get("acceleratorType") for spec in qr.get("tpu", {}).get("nodeSpec", [])}
        return self.stocked_out is None or self.stocked_out in types

    def _delete(self, qr_id: str, force: bool) -> Obj:
        qr = self.queued[qr_id]
        if qr["state"]["state"] == "ACTIVE" and not force:
            raise GoogleApiError(400, "Cannot delete a queued resource with active nodes; delete them or use force")
        qr["state"] = {"state": "DELETING"}
        return self._start(qr["name"], "")

    def _start(self, target: str, request_id: str) -> Obj:
        name = f"{self.parent}/operations/operation-{next(self._ids)}"
        self.operations[name] = _Operation(name, target)
        if request_id:
            self._by_request_id[request_id] = name
        return self._operation_json(self.operations[name])

    def _operation_json(self, op: _Operation) -> Obj:
        out: Obj = {"name": op.name, "done": op.done, "metadata": {"@type": _OPERATION_METADATA, "target": op.target}}
        if op.done and op.result is not None:
            out["response"] = op.result
        return out


def _expired(qr: Obj, now: datetime) -> bool:
    """Whether the request's valid-until time (``queueingPolicy``) has passed; never without one."""
    policy = qr.get("queueingPolicy", {})
    if "validUntilTime" in policy:
        return now >= _timestamp(policy["validUntilTime"])
    if "validUntilDuration" in policy:
        return now >= _timestamp(qr["createTime"]) + _duration(policy["validUntilDuration"])
    return False


def _timestamp(text: str) -> datetime:
    """An RFC 3339 timestamp as the JSON mapping writes it ("2024-05-01T00:00:00Z", up to nine fractional digits)."""
    found = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z", text)
    if found is None:
        raise GoogleApiError(400, f"Invalid timestamp {text!r}")
    micros = int((found[2] or "0")[:6].ljust(6, "0"))
    return datetime.fromisoformat(found[1]).replace(tzinfo=UTC, microsecond=micros)


def _duration(text: str) -> timedelta:
    """A ``google.protobuf.Duration`` as the JSON mapping writes it: seconds with an "s" ("1200s", "1.5s")."""
    found = re.fullmatch(r"(\d+(?:\.\d{1,9})?)s", text)
    if found is None:
        raise GoogleApiError(400, f"Invalid duration {text!r}")
    return timedelta(seconds=float(found[1]))
