"""What every part of the AWS proxy shares: its state (``_State``), the base the behaviours build on
(``ProxyBase``: the lock, the moto clients, a group's read, forwarding to moto), and AWS's wire formats (the
query API's XML, EKS's rest-json, each API's error format)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import uuid
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.fakes.aws_api.moto_server import AwsClients, MotoServer

ZONE = "us-east-1a"
ICE_MESSAGE = (
    "We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you requested (us-east-1a). "
    "Our system will be working on provisioning additional capacity. Launching EC2 instance failed. "
    "(InsufficientInstanceCapacity)"
)
_FOR_GROUP = "for the AutoScalingGroup."
_FINISHED = ("Successful", "Failed", "Cancelled")  # Activity.StatusCode values of an activity no longer in progress
# EKS's refusal of a node group update while the node group is not ACTIVE (another update in progress), as reported
# in aws/karpenter-provider-aws issue 133 (ResourceInUseException, HTTP 409).
NOT_ACTIVE_MESSAGE = "Nodegroup cannot be updated as it is currently not in Active State"
_ASG_NS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
_N = {"a": _ASG_NS}
ET.register_namespace("", _ASG_NS)


@dataclass
class _Update:
    id: str
    cluster: str
    nodegroup: str
    params: list[dict[str, str]]
    created: datetime
    status: str = "InProgress"

    def body(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "type": "ConfigUpdate",
            "params": self.params,
            "createdAt": self.created.timestamp(),
            "errors": [],
        }


@dataclass
class _Fault:
    code: str
    message: str
    status: int
    times: int


@dataclass
class _State:
    ready: set[str] = field(default_factory=set)  # instance ids past their lead time
    shortfall: Counter[str] = field(default_factory=Counter)  # group -> desired units that cannot launch
    activities: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    updates: list[_Update] = field(default_factory=list)
    tokens: dict[str, _Update] = field(default_factory=dict)
    nodegroup_groups: dict[tuple[str, str], str] = field(default_factory=dict)
    health: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # node group -> health issues
    faults: dict[str, _Fault] = field(default_factory=dict)
    busy: tuple[str, int] = ("ResourceInUseException", 409)  # the error an update meets while another runs
    before: dict[str, list[Callable[[], None]]] = field(default_factory=dict)  # operation -> what happens first
    calls: Counter[str] = field(default_factory=Counter)
    terminating: set[str] = field(default_factory=set)  # instance ids in Terminating:Wait
    hooked: bool = False  # a termination lifecycle hook holds the instances terminated with the decrement
    held: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # group -> instances the hook holds
    retained: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # group -> Terminating:Retained ones
    terminated: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # group -> Terminated ones listed
    listed_as: dict[str, str] = field(default_factory=dict)  # instance id -> state listed, the group counting it
    late_stockout: bool = False
    late_message: str = ICE_MESSAGE  # the failed launch's StatusMessage


class ProxyBase:
    """The state the proxy's behaviours share; ``FakeAwsApi`` sets it up."""

    moto: MotoServer
    now: datetime
    direct: AwsClients  # straight to moto: set-up, and what EKS does to its groups
    _state: _State
    _lock: threading.RLock

    def group(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.direct.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
        return dict(found["AutoScalingGroups"][0])

    def _forward(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.moto.port, timeout=30)
        try:
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no ~40 ms Nagle wait per call
            conn.request(method, target, body=body, headers={k: v for k, v in headers.items() if k.lower() != "host"})
            response = conn.getresponse()
            out = response.read()
            kept = {k: v for k, v in response.getheaders() if k.lower() in ("content-type", "x-amzn-errortype")}
            return response.status, kept, out
        finally:
            conn.close()


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _xml(text: str, status: int = 200) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "text/xml"}, text.encode()


def _json(payload: dict[str, Any], status: int = 200, error: str = "") -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json"} | ({"x-amzn-ErrorType": error} if error else {})
    return status, headers, json.dumps(payload).encode()


def _error(fault: _Fault, protocol: str) -> tuple[int, dict[str, str], bytes]:
    """An AWS error in the format of the API: rest-json (EKS), query (Auto Scaling) or EC2's own."""
    if protocol == "rest-json":
        return _json({"message": fault.message}, fault.status, fault.code)
    kind = "Receiver" if fault.status >= 500 else "Sender"
    if protocol == "2011-01-01":
        return _xml(
            f'<ErrorResponse xmlns="{_ASG_NS}"><Error><Type>{kind}</Type><Code>{fault.code}</Code><Message>'
            f"{_esc(fault.message)}</Message></Error><RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>",
            fault.status,
        )
    return _xml(
        f"<Response><Errors><Error><Code>{fault.code}</Code><Message>{_esc(fault.message)}</Message></Error></Errors>"
        f"<RequestID>{uuid.uuid4()}</RequestID></Response>",
        fault.status,
    )
