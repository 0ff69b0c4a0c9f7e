"""A local moto server (EC2, Auto Scaling, EKS) and an HTTP proxy in front of it adding what moto does not model.

``MotoServer`` runs moto's own server process on 127.0.0.1 (a free port), stopped by its PID. ``FakeAwsApi`` is what
the boto3 clients under test talk to: it forwards every request to moto unchanged, except for the behaviours below
(each with its source in ``tests/fakes/REFERENCE.md``), which it adds at the HTTP layer:

- lead time: instances launched since the last ``settle`` are ``Pending``, not ``InService``;
- launches that fail for capacity after ``SetDesiredCapacity`` was accepted (``late_stockout``): the desired
  capacity stays as asked, the instances never appear, and at ``settle`` a failed "Launching a new EC2 instance"
  scaling activity records ``InsufficientInstanceCapacity``; ``stockout`` records such an activity at once, the
  Availability Zone it was attempted in in its ``Details``;
- ``DescribeScalingActivities`` answered from those activities (moto returns none), those in progress first, then
  latest first, paged as AWS pages them (``MaxRecords`` 1..100, default 100, and ``NextToken``);
- a group's bounds, which moto does not check: ``SetDesiredCapacity`` outside ``MinSize``..``MaxSize``, and
  ``TerminateInstanceInAutoScalingGroup`` with the decrement while the desired capacity is at ``MinSize``, fail with
  ``ValidationError``; ``UpdateNodegroupConfig`` with ``desiredSize`` outside the node group's bounds fails with
  ``InvalidParameterException`` (each with AWS's wording);
- EKS node group updates: ``UpdateNodegroupConfig`` is ``InProgress`` (node group ``UPDATING``) until
  ``finish_operations`` or ``settle``, and another one meanwhile is refused as not ACTIVE (``ResourceInUseException``,
  or the code of ``answer_busy_with``); an update someone else started (``start_update``), also between a caller's
  read and its write (``before_next``); ``ListUpdates``/``DescribeUpdate`` (not in moto) answered from them, oldest
  first, ``ListUpdates`` paged as AWS pages it (``maxResults`` 1..100, default 100, and ``nextToken``); earlier
  settled updates can be added in bulk (``add_settled_updates``); a repeated ``clientRequestToken`` returns the
  first update; the node group's Auto Scaling group follows its scaling config, and ``desiredSize`` follows the
  group's desired capacity;
- node group health issues (``health_issue``, ``clear_health_issues``), as ``DescribeNodegroup`` reports them;
- launch activities that did not fail (``launch_activity``), as a group records each launch;
- errors injected per operation (``fail``): throttling, access denied, capacity, in each API's error format;
- a termination lifecycle hook holding the instances terminated with the decrement (``hold_terminations``);
- a Spot interruption whose termination is still under way (``interrupt``): the instance is ``Terminating:Wait``
  (a termination lifecycle hook running) and the group records an ``InProgress`` "Terminating EC2 instance" activity,
  its desired capacity unchanged; the replacement is launched once the termination ends (``reclaim``);
- an instance EC2 takes back (``reclaim``, a Spot interruption): moto terminates it and its group launches a
  replacement; ``TerminateInstanceInAutoScalingGroup`` of an instance in no group then fails with ``ValidationError``
  "Instance Id not found - No managed instance found for instance ID ..." (moto answers 500).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import functools
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3

REGION = "us-east-1"
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
_EKS_ROUTES = [
    ("POST", re.compile(r"^/clusters/([^/]+)/node-groups/([^/]+)/update-config$"), "UpdateNodegroupConfig"),
    ("GET", re.compile(r"^/clusters/([^/]+)/node-groups/([^/]+)$"), "DescribeNodegroup"),
    ("GET", re.compile(r"^/clusters/([^/]+)/updates/([^/]+)$"), "DescribeUpdate"),
    ("GET", re.compile(r"^/clusters/([^/]+)/updates$"), "ListUpdates"),
]
ET.register_namespace("", _ASG_NS)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoServer:
    """moto's server in its own process on 127.0.0.1; ``stop`` ends that process by PID."""

    def __init__(self) -> None:
        self.port = _free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        command = [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(self.port)]
        # Without moto's catalogue of public AMIs (loading it takes seconds); the launch template names its own.
        env = os.environ | {"MOTO_EC2_LOAD_DEFAULT_AMIS": "false"}
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1).close()
                return self
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.05)

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        urllib.request.urlopen(request, timeout=10).close()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None


_shared: MotoServer | None = None


_proxy: FakeAwsApi | None = None


def shared_moto() -> MotoServer:
    """One moto server per test process, started on first use and stopped (by PID) when the process exits."""
    global _shared  # noqa: PLW0603 - one server process per test process
    if _shared is None:
        _shared = MotoServer().start()
        atexit.register(_shared.stop)
    return _shared


def shared_aws(now: datetime | None = None) -> FakeAwsApi:
    """The proxy in front of ``shared_moto``, emptied for a new test (one per process: clients are reused)."""
    global _proxy  # noqa: PLW0603 - one proxy per test process
    if _proxy is None:
        _proxy = FakeAwsApi(shared_moto()).start()
        atexit.register(_proxy.stop)
    return _proxy.fresh(now)


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
    late_stockout: bool = False
    late_message: str = ICE_MESSAGE  # the failed launch's StatusMessage


class FakeAwsApi:
    """The proxy the clients under test use; ``moto`` holds the resources. ``now`` stamps injected activities."""

    def __init__(self, moto: MotoServer, now: datetime | None = None) -> None:
        self.moto = moto
        self.now = now or datetime(2024, 5, 1, tzinfo=UTC)
        self._state = _State()
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self.direct = _clients(moto.url)  # straight to moto: set-up, and what EKS does to its groups

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def fresh(self, now: datetime | None = None) -> FakeAwsApi:
        """Forget every resource and behaviour (moto's too): the state of a new test."""
        self.moto.reset()
        self._state = _State()
        self.now = now or datetime(2024, 5, 1, tzinfo=UTC)
        return self

    def start(self) -> FakeAwsApi:
        self.moto.reset()
        server = ThreadingHTTPServer(("127.0.0.1", 0), _ProxyHandler)
        server.daemon_threads = True
        server.owner = self  # type: ignore[attr-defined]
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def clients(self) -> AwsClients:
        return _clients(self.url)

    # -- set-up -----------------------------------------------------------------------------------------------
    def add_group(
        self, name: str, nodes: int, max_size: int = 16, min_size: int = 0, zones: tuple[str, ...] = (ZONE,)
    ) -> str:
        """A self-managed Auto Scaling group of p5.48xlarge nodes in ``zones``, ``nodes`` of them ready."""
        ec2, autoscaling = self.direct.ec2, self.direct.autoscaling
        if not ec2.describe_launch_templates(Filters=[{"Name": "launch-template-name", "Values": ["gpu"]}])[
            "LaunchTemplates"
        ]:
            data = {"ImageId": "ami-0123456789abcdef0", "InstanceType": "p5.48xlarge"}
            ec2.create_launch_template(LaunchTemplateName="gpu", LaunchTemplateData=data)
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=name,
            LaunchTemplate={"LaunchTemplateName": "gpu"},
            MinSize=min_size,
            MaxSize=max_size,
            DesiredCapacity=nodes,
            AvailabilityZones=list(zones),
        )
        self.settle()
        return name

    def add_nodegroup(
        self,
        cluster: str,
        nodegroup: str,
        nodes: int,
        max_size: int = 16,
        min_size: int = 0,
        zones: tuple[str, ...] = (ZONE,),
    ) -> str:
        """An EKS managed node group (and the cluster if new) in ``zones``; returns the Auto Scaling group it runs
        in."""
        eks = self.direct.eks
        if cluster not in eks.list_clusters()["clusters"]:
            eks.create_cluster(name=cluster, roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={})
        scaling = {"minSize": min_size, "maxSize": max_size, "desiredSize": nodes}
        created = eks.create_nodegroup(
            clusterName=cluster,
            nodegroupName=nodegroup,
            nodeRole="arn:aws:iam::123456789012:role/node",
            subnets=["subnet-1"],
            scalingConfig=scaling,
        )["nodegroup"]
        group = str(created["resources"]["autoScalingGroups"][0]["name"])
        self._state.nodegroup_groups[(cluster, nodegroup)] = group
        return self.add_group(group, nodes, max_size, min_size, zones)

    # -- behaviours -------------------------------------------------------------------------------------------
    def settle(self) -> None:
        """Lead time passes: updates end, launched instances are in service, launches without capacity fail."""
        with self._lock:
            self.finish_operations()
            for group in self.direct.autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]:
                self._state.ready.update(i["InstanceId"] for i in group["Instances"])
                name = group["AutoScalingGroupName"]
                if self._state.shortfall[name] > 0:
                    self.stockout(name, self._state.late_message)

    def finish_operations(self) -> None:
        with self._lock:
            for update in self._state.updates:
                update.status = "Successful"

    def stockout(self, group: str, message: str = ICE_MESSAGE, zone: str = ZONE) -> None:
        """Record a launch in ``group`` that just failed with ``message`` (for capacity unless the message says
        otherwise), attempted in ``zone`` (``Details``)."""
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        activity = {
            "ActivityId": str(uuid.uuid4()),
            "AutoScalingGroupName": group,
            "Description": "Launching a new EC2 instance.  Status Reason: " + message,
            "Cause": f"At {stamp} an instance was started in response to a difference between desired and actual "
            "capacity, increasing the capacity from 0 to 1.",
            "StartTime": stamp,
            "EndTime": stamp,
            "StatusCode": "Failed",
            "StatusMessage": message,
            "Progress": "100",
            "Details": json.dumps({"Subnet ID": "subnet-1", "Availability Zone": zone}),
        }
        with self._lock:
            self._state.activities.setdefault(group, []).insert(0, activity)

    def health_issue(self, nodegroup: str, code: str, message: str) -> None:
        """EKS reports a health issue on the node group (``Nodegroup.health.issues``)."""
        group = next(g for (_, ng), g in self._state.nodegroup_groups.items() if ng == nodegroup)
        issue = {"code": code, "message": message, "resourceIds": [group]}
        self._state.health.setdefault(nodegroup, []).append(issue)

    def set_bounds(self, group: str, min_size: int, max_size: int) -> None:
        """An operator changes the group's bounds (and its node group's, if it has one), the desired capacity kept."""
        with self._lock:
            moto_desired = self.group(group)["DesiredCapacity"]
            self.direct.autoscaling.update_auto_scaling_group(
                AutoScalingGroupName=group, MinSize=min_size, MaxSize=max_size, DesiredCapacity=moto_desired
            )
            for (cluster, nodegroup), name in self._state.nodegroup_groups.items():
                if name == group:
                    scaling = {"minSize": min_size, "maxSize": max_size}
                    self.direct.eks.update_nodegroup_config(
                        clusterName=cluster, nodegroupName=nodegroup, scalingConfig=scaling
                    )

    def clear_health_issues(self, nodegroup: str) -> None:
        """EKS no longer reports any health issue on the node group."""
        self._state.health.pop(nodegroup, None)

    def launch_activity(self, group: str, status: str = "Successful") -> None:
        """Record a launch in ``group`` that did not fail (``Successful``, or ``InProgress``), stamped ``now``."""
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        activity = {
            "ActivityId": str(uuid.uuid4()),
            "AutoScalingGroupName": group,
            "Description": "Launching a new EC2 instance: i-0123456789abcdef0",
            "Cause": f"At {stamp} an instance was started in response to a difference between desired and actual "
            "capacity, increasing the capacity from 0 to 1.",
            "StartTime": stamp,
            "StatusCode": status,
            "Progress": "100" if status == "Successful" else "30",
        }
        if status == "Successful":
            activity["EndTime"] = stamp
        with self._lock:
            self._state.activities.setdefault(group, []).insert(0, activity)

    def reclaim(self, instance_id: str) -> None:
        """EC2 takes the instance back (a Spot interruption): it is terminated and leaves its group, which was not
        asked to shrink and launches a replacement (moto does both at once; the replacement is ``Pending`` until
        ``settle``)."""
        with self._lock:
            self._state.terminating.discard(instance_id)
            self.direct.ec2.terminate_instances(InstanceIds=[instance_id])

    def interrupt(self, group: str, instance_id: str) -> None:
        """A Spot interruption of ``instance_id`` under way, stamped ``now``: the instance is ``Terminating:Wait``
        (its group's termination lifecycle hook runs) and the group records the termination as ``InProgress``; it
        launches the replacement once the termination ends (``reclaim``)."""
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        activity = {
            "ActivityId": str(uuid.uuid4()),
            "AutoScalingGroupName": group,
            "Description": f"Terminating EC2 instance: {instance_id}",
            "Cause": f"At {stamp} an instance was taken out of service in response to an EC2 health check indicating "
            "it has been terminated or stopped.",
            "StartTime": stamp,
            "StatusCode": "InProgress",
            "Progress": "50",
        }
        with self._lock:
            self._state.terminating.add(instance_id)
            self._state.activities.setdefault(group, []).insert(0, activity)

    def hold_terminations(self) -> None:
        """From now on a termination lifecycle hook holds each instance terminated with the desired capacity
        lowered (``TerminateInstanceInAutoScalingGroup``): the group's desired capacity is lowered at once, and the
        instance stays listed ``Terminating:Wait`` with an ``InProgress`` "Terminating EC2 instance" activity whose
        ``Cause`` says the capacity shrank (as EKS managed node groups always have such a hook)."""
        self._state.hooked = True

    def _hold(self, form: dict[str, str]) -> None:
        """Remember an instance the hook holds, as the group listed it, and record its termination activity."""
        instance_id = form["InstanceId"]
        (listed,) = self.direct.autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])[
            "AutoScalingInstances"
        ]
        group = str(listed["AutoScalingGroupName"])
        desired = int(self.group(group)["DesiredCapacity"]) + self._state.shortfall[group]
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        activity = {
            "ActivityId": str(uuid.uuid4()),
            "AutoScalingGroupName": group,
            "Description": f"Terminating EC2 instance: {instance_id}",
            "Cause": f"At {stamp} instance {instance_id} was taken out of service in response to a user request, "
            f"shrinking the capacity from {desired} to {desired - 1}.",
            "StartTime": stamp,
            "StatusCode": "InProgress",
            "Progress": "0",
        }
        held = {"InstanceId": instance_id, "AvailabilityZone": str(listed["AvailabilityZone"])}
        self._state.held.setdefault(group, []).append(held)
        self._state.activities.setdefault(group, []).insert(0, activity)

    def add_settled_updates(self, cluster: str, nodegroup: str, count: int) -> None:
        """``count`` earlier updates of the node group, all ``Successful`` (a long-lived node group's history)."""
        with self._lock:
            for _ in range(count):
                update = _Update(str(uuid.uuid4()), cluster, nodegroup, [], self.now, status="Successful")
                self._state.updates.append(update)

    def start_update(self, cluster: str, nodegroup: str) -> str:
        """An update of the node group started by someone else (an operator's version or label change), stamped
        ``now``: ``InProgress`` (the node group ``UPDATING``) until ``finish_operations`` or ``settle``."""
        with self._lock:
            update = _Update(str(uuid.uuid4()), cluster, nodegroup, [], self.now)
            self._state.updates.append(update)
            return update.id

    def answer_busy_with(self, code: str, status: int) -> None:
        """The error code and HTTP status an ``UpdateNodegroupConfig`` meets while another update of the node group
        is in progress (``ResourceInUseException``, 409, by default), its message EKS's ``NOT_ACTIVE_MESSAGE``."""
        self._state.busy = (code, status)

    def before_next(self, operation: str, action: Callable[[], None]) -> None:
        """Run ``action`` once, just before the next call of ``operation`` is answered: what changed between the
        caller's read and its write."""
        self._state.before.setdefault(operation, []).append(action)

    def arm_late_stockout(self, message: str = ICE_MESSAGE) -> None:
        """From now on, instances asked for beyond those already there cannot be launched; the failed launches'
        StatusMessage is ``message``."""
        self._state.late_stockout = True
        self._state.late_message = message

    def restock(self) -> None:
        self._state.late_stockout = False

    def fail(self, operation: str, code: str, message: str, status: int = 400, times: int = 1) -> None:
        """The next ``times`` calls of ``operation`` fail with this AWS error."""
        self._state.faults[operation] = _Fault(code, message, status, times)

    def calls(self, operation: str) -> int:
        return self._state.calls[operation]

    def group(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.direct.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
        return dict(found["AutoScalingGroups"][0])

    # -- the proxy --------------------------------------------------------------------------------------------
    def handle(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        path = urlsplit(target).path
        eks = next(((op, m.groups()) for verb, m_, op in _EKS_ROUTES if verb == method and (m := m_.match(path))), None)
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()} if not eks and body else {}
        operation = eks[0] if eks else form.get("Action", "")
        with self._lock:
            self._state.calls[operation] += 1
            for action in self._state.before.pop(operation, []):
                action()
            fault = self._state.faults.get(operation)
            if fault is not None and fault.times > 0:
                fault.times -= 1
                return _error(fault, "rest-json" if eks else form.get("Version", ""))
        if eks:
            return self._eks(operation, eks[1], target, method, headers, body)
        if operation == "DescribeScalingActivities":
            return self._activities(form)
        if operation == "TerminateInstanceInAutoScalingGroup" and not self._managed(form["InstanceId"]):
            message = f"Instance Id not found - No managed instance found for instance ID {form['InstanceId']}"
            return _error(_Fault("ValidationError", message, 400, 1), form.get("Version", ""))
        if operation in ("SetDesiredCapacity", "TerminateInstanceInAutoScalingGroup"):
            refused = self._out_of_bounds(operation, form)
            if refused:
                return _error(_Fault("ValidationError", refused, 400, 1), form.get("Version", ""))
        decrement = form.get("ShouldDecrementDesiredCapacity", "").lower() == "true"
        if operation == "TerminateInstanceInAutoScalingGroup" and decrement and self._state.hooked:
            with self._lock:
                self._hold(form)  # moto then removes the instance and lowers the desired capacity; listed still
        if operation == "SetDesiredCapacity":
            self._set_desired(form["AutoScalingGroupName"], int(form["DesiredCapacity"]))
            return _xml(
                f'<SetDesiredCapacityResponse xmlns="{_ASG_NS}"><ResponseMetadata><RequestId>'
                f"{uuid.uuid4()}</RequestId></ResponseMetadata></SetDesiredCapacityResponse>"
            )
        status, out_headers, out = self._forward(method, target, headers, body)
        if operation == "DescribeAutoScalingGroups" and status == 200:
            out = self._rewrite_groups(out)
        return status, out_headers, out

    def _managed(self, instance_id: str) -> bool:
        """Whether an Auto Scaling group holds the instance."""
        found = self.direct.autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])
        return bool(found["AutoScalingInstances"])

    def _out_of_bounds(self, operation: str, form: dict[str, str]) -> str:
        """AWS's refusal of a change that would leave the group's bounds, or ""."""
        if operation == "SetDesiredCapacity":
            group = self.group(form["AutoScalingGroupName"])
            asked = int(form["DesiredCapacity"])
            if asked < group["MinSize"]:
                return f"New SetDesiredCapacity value {asked} is below min value {group['MinSize']} {_FOR_GROUP}"
            if asked > group["MaxSize"]:
                return f"New SetDesiredCapacity value {asked} is above max value {group['MaxSize']} {_FOR_GROUP}"
            return ""
        if form.get("ShouldDecrementDesiredCapacity", "").lower() != "true":
            return ""
        found = self.direct.autoscaling.describe_auto_scaling_instances(InstanceIds=[form["InstanceId"]])
        if not found["AutoScalingInstances"]:
            return ""
        name = found["AutoScalingInstances"][0]["AutoScalingGroupName"]
        group = self.group(name)
        desired = group["DesiredCapacity"] + self._state.shortfall[name]
        if desired <= group["MinSize"]:
            return (
                f"Currently, desiredSize equals minSize ({group['MinSize']}). Terminating instance without replacement "
                "will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or "
                "lower group's min size."
            )
        return ""

    def _set_desired(self, group: str, desired: int) -> None:
        with self._lock:
            live = len(self.group(group)["Instances"])
            short = desired - live if self._state.late_stockout and desired > live else 0
            self._state.shortfall[group] = short
            self.direct.autoscaling.set_desired_capacity(AutoScalingGroupName=group, DesiredCapacity=desired - short)

    def _rewrite_groups(self, raw: bytes) -> bytes:
        root = ET.fromstring(raw)
        for group in root.iterfind(".//a:AutoScalingGroups/a:member", _N):
            name = group.findtext("a:AutoScalingGroupName", "", _N)
            desired = group.find("a:DesiredCapacity", _N)
            if desired is not None and desired.text is not None:
                desired.text = str(int(desired.text) + self._state.shortfall[name])
            instances = group.find("a:Instances", _N)
            for held in self._state.held.get(name, []):
                if instances is None:
                    instances = ET.SubElement(group, f"{{{_ASG_NS}}}Instances")
                member = ET.SubElement(instances, f"{{{_ASG_NS}}}member")
                fields = {**held, "LifecycleState": "Terminating:Wait", "HealthStatus": "Healthy"}
                for key, value in {**fields, "ProtectedFromScaleIn": "false"}.items():
                    ET.SubElement(member, f"{{{_ASG_NS}}}{key}").text = value
            for inst in group.iterfind("a:Instances/a:member", _N):
                state = inst.find("a:LifecycleState", _N)
                instance_id = inst.findtext("a:InstanceId", "", _N)
                if state is not None and instance_id in self._state.terminating:
                    state.text = "Terminating:Wait"
                elif state is not None and instance_id not in self._state.ready:
                    state.text = "Pending"
        return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))

    def _activities(self, form: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """One page of the group's activities: those in progress first, then by start time, latest first;
        ``MaxRecords`` of them (1..100, default 100) from ``NextToken`` on, and a ``NextToken`` while more remain."""
        with self._lock:
            listed = list(self._state.activities.get(form.get("AutoScalingGroupName", ""), []))
        listed.sort(key=lambda a: a["StartTime"], reverse=True)
        listed.sort(key=lambda a: a.get("StatusCode") in _FINISHED)
        try:
            size = int(form.get("MaxRecords", "100"))
            start = int(base64.urlsafe_b64decode(form["NextToken"]).decode()) if "NextToken" in form else 0
        except ValueError:
            return _error(_Fault("InvalidNextToken", "The token is not valid.", 400, 1), form.get("Version", ""))
        if not 1 <= size <= 100:
            message = f"Value '{size}' at 'maxRecords' failed to satisfy constraint: Member must be from 1 to 100"
            return _error(_Fault("ValidationError", message, 400, 1), form.get("Version", ""))
        members = "".join(
            "<member>" + "".join(f"<{k}>{_esc(v)}</{k}>" for k, v in a.items()) + "</member>"
            for a in listed[start : start + size]
        )
        more = start + size < len(listed)
        token = (
            f"<NextToken>{base64.urlsafe_b64encode(str(start + size).encode()).decode()}</NextToken>" if more else ""
        )
        return _xml(
            f'<DescribeScalingActivitiesResponse xmlns="{_ASG_NS}"><DescribeScalingActivitiesResult><Activities>'
            f"{members}</Activities>{token}</DescribeScalingActivitiesResult><ResponseMetadata><RequestId>"
            f"{uuid.uuid4()}</RequestId></ResponseMetadata></DescribeScalingActivitiesResponse>"
        )

    def _eks(
        self, operation: str, where: tuple[str, ...], target: str, method: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        cluster = where[0]
        query = {k: v[0] for k, v in parse_qs(urlsplit(target).query).items()}
        if operation == "ListUpdates":
            ids = [u.id for u in self._state.updates if (u.cluster, u.nodegroup) == (cluster, query["nodegroupName"])]
            return _page(ids, query)
        if operation == "DescribeUpdate":
            found = next((u for u in self._state.updates if u.id == where[1]), None)
            if found is None:
                return _json({"message": f"No update found for ID: {where[1]}"}, 404, "ResourceNotFoundException")
            return _json({"update": found.body()})
        nodegroup = where[1]
        if operation == "UpdateNodegroupConfig":
            return self._update_config(cluster, nodegroup, json.loads(body or b"{}"), method, target, headers, body)
        status, out_headers, out = self._forward(method, target, headers, body)
        if status == 200:  # DescribeNodegroup: the status and size EKS shows
            found = json.loads(out)
            ng = found["nodegroup"]
            group = self.group(self._state.nodegroup_groups[(cluster, nodegroup)])
            running = any(u.status == "InProgress" and u.nodegroup == nodegroup for u in self._state.updates)
            ng["status"] = "UPDATING" if running else ng["status"]
            ng.setdefault("health", {})["issues"] = self._state.health.get(nodegroup, [])
            ng["scalingConfig"]["desiredSize"] = (
                group["DesiredCapacity"] + self._state.shortfall[group["AutoScalingGroupName"]]
            )
            out = json.dumps(found).encode()
        return status, out_headers, out

    def _update_config(
        self,
        cluster: str,
        nodegroup: str,
        asked: dict[str, Any],
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes,
    ) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            token = asked.get("clientRequestToken")
            if token and token in self._state.tokens:
                return _json({"update": self._state.tokens[token].body()})
            if any(u.status == "InProgress" and u.nodegroup == nodegroup for u in self._state.updates):
                code, status = self._state.busy
                return _json({"message": NOT_ACTIVE_MESSAGE}, status, code)
            refused = self._outside_scaling(cluster, nodegroup, asked.get("scalingConfig", {}))
            if refused:
                return _json({"message": refused}, 400, "InvalidParameterException")
            status, out_headers, out = self._forward(method, target, headers, body)
            if status != 200:
                return status, out_headers, out
            scaling = asked.get("scalingConfig", {})
            group = self._state.nodegroup_groups[(cluster, nodegroup)]
            if "minSize" in scaling or "maxSize" in scaling:
                bounds = {k[0].upper() + k[1:]: v for k, v in scaling.items() if k in ("minSize", "maxSize")}
                self.direct.autoscaling.update_auto_scaling_group(AutoScalingGroupName=group, **bounds)
            if "desiredSize" in scaling:
                self._set_desired(group, int(scaling["desiredSize"]))
            update = _Update(str(uuid.uuid4()), cluster, nodegroup, json.loads(out)["update"]["params"], self.now)
            self._state.updates.append(update)
            if token:
                self._state.tokens[token] = update
            return _json({"update": update.body()})

    def _outside_scaling(self, cluster: str, nodegroup: str, asked: dict[str, int]) -> str:
        """EKS's refusal of a scaling config whose desired size is outside its bounds, or ""."""
        now = self.direct.eks.describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)["nodegroup"]
        group = self.group(self._state.nodegroup_groups[(cluster, nodegroup)])
        current = dict(now["scalingConfig"])
        current["desiredSize"] = group["DesiredCapacity"] + self._state.shortfall[group["AutoScalingGroupName"]]
        scaling = current | asked
        if scaling["minSize"] > scaling["desiredSize"]:
            return f"Minimum capacity {scaling['minSize']} can't be greater than desired size {scaling['desiredSize']}"
        if scaling["desiredSize"] > scaling["maxSize"]:
            return "desiredSize can't be greater than maxSize"
        return ""

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


@dataclass(frozen=True)
class AwsClients:
    autoscaling: Any
    ec2: Any
    eks: Any


@functools.cache
def _clients(url: str) -> AwsClients:
    """Real boto3 clients for ``url``; the keys are moto's test keys, never real ones."""
    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    from botocore.config import Config

    config = Config(retries={"total_max_attempts": 1, "mode": "standard"})  # each call once: faults are counted
    return AwsClients(
        autoscaling=session.client("autoscaling", endpoint_url=url, config=config),
        ec2=session.client("ec2", endpoint_url=url, config=config),
        eks=session.client("eks", endpoint_url=url, config=config),
    )


def _page(ids: list[str], query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One page of ``ListUpdates``: ``maxResults`` ids (1..100, default 100) from ``nextToken`` on."""
    try:
        size = int(query.get("maxResults", "100"))
        start = int(base64.urlsafe_b64decode(query["nextToken"]).decode()) if "nextToken" in query else 0
    except ValueError:
        return _json({"message": "The nextToken or maxResults is not valid"}, 400, "InvalidParameterException")
    if not 1 <= size <= 100 or not 0 <= start <= len(ids):
        return _json({"message": "maxResults must be between 1 and 100"}, 400, "InvalidParameterException")
    body: dict[str, Any] = {"updateIds": ids[start : start + size]}
    if start + size < len(ids):
        body["nextToken"] = base64.urlsafe_b64encode(str(start + size).encode()).decode()
    return _json(body)


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


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        owner: FakeAwsApi = self.server.owner  # type: ignore[attr-defined]
        status, headers, out = owner.handle(self.command, self.path, dict(self.headers.items()), body)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        # A client that gave up waiting (a test's short read timeout) has nobody left to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(out)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        pass
