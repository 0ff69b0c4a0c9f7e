"""``FakeAwsApi``, the HTTP proxy in front of moto that the clients under test use: its life (start, stop, a fresh
state per test), the set-up of groups and node groups, the passing of lead time, injected faults, and the routing of
each request to the EC2/Auto Scaling or EKS behaviours or on to moto unchanged."""

from __future__ import annotations

import atexit
import contextlib
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.aws_api.eks import _EKS_ROUTES, EksBehaviours
from tests.fakes.aws_api.moto_server import AwsClients, MotoServer, _clients, shared_moto
from tests.fakes.aws_api.state import _ASG_NS, ZONE, _error, _Fault, _State, _xml

_proxy: FakeAwsApi | None = None


def shared_aws(now: datetime | None = None) -> FakeAwsApi:
    """The proxy in front of ``shared_moto``, emptied for a new test (one per process: clients are reused)."""
    global _proxy  # noqa: PLW0603 - one proxy per test process
    if _proxy is None:
        _proxy = FakeAwsApi(shared_moto()).start()
        atexit.register(_proxy.stop)
    return _proxy.fresh(now)


class FakeAwsApi(EksBehaviours):
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
                stamp = self.now.strftime("%Y-%m-%dT%H:%M:%S.000Z")
                for launch in self._state.activities.get(name, []):  # the launches recorded in progress end
                    if (
                        launch["Description"].startswith("Launching a new EC2 instance: ")
                        and launch["StatusCode"] == "InProgress"
                    ):
                        launch.update(StatusCode="Successful", Progress="100", EndTime=stamp)
                if self._state.shortfall[name] > 0:
                    self.stockout(name, self._state.late_message)

    def before_next(self, operation: str, action: Callable[[], None]) -> None:
        """Run ``action`` once, just before the next call of ``operation`` is answered: what changed between the
        caller's read and its write."""
        self._state.before.setdefault(operation, []).append(action)

    def fail(self, operation: str, code: str, message: str, status: int = 400, times: int = 1) -> None:
        """The next ``times`` calls of ``operation`` fail with this AWS error."""
        self._state.faults[operation] = _Fault(code, message, status, times)

    def calls(self, operation: str) -> int:
        return self._state.calls[operation]

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
        if operation == "TerminateInstanceInAutoScalingGroup" and self._retained_group(form["InstanceId"]):
            return self._terminate_retained(form)
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
