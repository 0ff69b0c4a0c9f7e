"""What only the AWS adapters do (beyond the shared contract), with boto3 against moto behind the proxy of
``tests.fakes.aws_api``: error translation at the edge, a node group update running across a restart, launch
failures found in scaling activities and node group health, and exactly the drained node's instance terminated."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from config.aws import EKS_NODEGROUP_LABEL
from kube import KubernetesApi
from models import ActionStatus, CapacityUnavailable, PermanentActuatorError, Resize, TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator, eks_actuator
from tests.fakes import kube_objects as objs
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("code", "status", "message", "error"),
    [
        ("Throttling", 400, "Rate exceeded", TransientActuatorError),
        ("ScalingActivityInProgress", 400, "Scaling activity is in progress", TransientActuatorError),
        ("InternalFailure", 500, "internal error", TransientActuatorError),
        (
            "AccessDenied",
            403,
            "User is not authorized to perform: autoscaling:SetDesiredCapacity",
            PermanentActuatorError,
        ),
        (
            "ValidationError",
            400,
            "The launch template for Auto Scaling group gpu-spot is not valid",
            PermanentActuatorError,
        ),
        (  # the bounds moved between reading the group and the call: read again next tick
            "ValidationError",
            400,
            "New SetDesiredCapacity value 3 is above max value 2 for the AutoScalingGroup.",
            TransientActuatorError,
        ),
        (
            "InsufficientInstanceCapacity",
            500,
            "There is no Spot capacity available that matches your request.",
            CapacityUnavailable,
        ),
    ],
)
def test_auto_scaling_errors_become_decisions(
    aws_api: FakeAwsApi, code: str, status: int, message: str, error: type[Exception]
) -> None:
    aws_api.add_group("gpu-spot", nodes=1)
    aws_api.fail("SetDesiredCapacity", code, message, status)
    with pytest.raises(error, match=code) as raised:
        asg_actuator(aws_api, SimulatedClock(T0)).resize("spot", 3, "k")
    assert getattr(raised.value, "pool_id", None) == "spot"
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 1


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("ThrottlingException", 429, TransientActuatorError),
        ("ResourceInUseException", 409, TransientActuatorError),
        ("AccessDeniedException", 403, PermanentActuatorError),
        ("ResourceNotFoundException", 404, PermanentActuatorError),
    ],
)
def test_eks_errors_become_decisions(aws_api: FakeAwsApi, code: str, status: int, error: type[Exception]) -> None:
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    aws_api.fail("UpdateNodegroupConfig", code, f"{code} from EKS", status)
    with pytest.raises(error, match=code):
        eks_actuator(aws_api, SimulatedClock(T0)).resize("od", 3, "k")


def test_a_restart_during_a_node_group_update_starts_no_second_update(aws_api: FakeAwsApi) -> None:
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    clock = SimulatedClock(T0)
    first = eks_actuator(aws_api, clock).resize("od", 3, "up")
    assert first.status is ActionStatus.STARTED

    after = eks_actuator(aws_api, clock)  # a new process: no memory of the key, only what EKS reports
    (state,) = after.list_pools()
    assert state.in_flight_operation is not None and state.in_flight_operation in first.detail
    assert (state.ready_units, state.target_units) == (1, 3)
    assert after.resize("od", 3, "up").status is ActionStatus.DONE  # the same planned action: already asked
    with pytest.raises(TransientActuatorError, match="still in progress"):
        after.resize("od", 4, "up-more")  # a new target waits for the running update
    assert aws_api.calls("UpdateNodegroupConfig") == 1

    aws_api.settle()
    (state,) = after.list_pools()
    assert (state.ready_units, state.target_units, state.in_flight_operation) == (3, 3, None)


def test_a_repeated_client_request_token_is_one_update(aws_api: FakeAwsApi) -> None:
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    clock = SimulatedClock(T0)
    first = eks_actuator(aws_api, clock).resize("od", 2, "same-key")
    aws_api.finish_operations()
    again = eks_actuator(aws_api, clock).resize("od", 2, "same-key")
    assert again.status is ActionStatus.DONE
    assert aws_api.calls("UpdateNodegroupConfig") == 1
    assert first.status is ActionStatus.STARTED


def test_a_spot_launch_failure_is_failed_units_then_removed_and_refused(aws_api: FakeAwsApi) -> None:
    aws_api.add_group("gpu-spot", nodes=1)
    clock = SimulatedClock(T0)
    aws_api.arm_late_stockout()
    assert asg_actuator(aws_api, clock).resize("spot", 4, "up").status is ActionStatus.STARTED
    aws_api.settle()  # the group records a failed launch: InsufficientInstanceCapacity in us-east-1a

    clock.advance(timedelta(minutes=20))  # long after the first failure: the group keeps retrying, and failing
    aws_api.now = clock.now()
    aws_api.settle()
    actuator = asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 3)
    with pytest.raises(CapacityUnavailable, match="InsufficientInstanceCapacity") as refused:
        actuator.resize("spot", 5, "up-again")
    assert "us-east-1a" in str(refused.value)
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 1  # back to what exists
    assert aws_api.calls("SetDesiredCapacity") == 2  # the scale-up, then the removal: never a second scale-up


# A failed scaling activity's StatusMessage names a limit in words, not by its error code (sources in
# actuators/aws_errors.py).
LIMIT_MESSAGES = [
    "You have requested more vCPU capacity than your current vCPU limit of 384 allows for the instance bucket that "
    "the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an "
    "adjustment to this limit. Launching EC2 instance failed.",
    "You have requested more instances (7) than your current instance limit of 6 allows for the specified instance "
    "type. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit. "
    "Launching EC2 instance failed.",
    "Max spot instance count exceeded. Launching EC2 instance failed.",
]


@pytest.mark.parametrize("message", LIMIT_MESSAGES)
def test_a_launch_refused_by_an_account_limit_is_failed_units_not_units_still_coming(
    aws_api: FakeAwsApi, message: str
) -> None:
    aws_api.add_group("gpu-spot", nodes=1)
    clock = SimulatedClock(T0)
    aws_api.arm_late_stockout(message)
    assert asg_actuator(aws_api, clock).resize("spot", 3, "up").status is ActionStatus.STARTED
    aws_api.settle()
    clock.advance(timedelta(minutes=1))
    actuator = asg_actuator(aws_api, clock)
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    with pytest.raises(CapacityUnavailable, match=r"limit|Max spot"):
        actuator.resize("spot", 4, "up-again")
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 1  # never asked to grow further


def test_a_recent_launch_failure_refuses_growth_until_it_is_old(aws_api: FakeAwsApi) -> None:
    aws_api.add_group("gpu-spot", nodes=1)
    clock = SimulatedClock(T0)
    aws_api.stockout("gpu-spot")
    with pytest.raises(CapacityUnavailable):
        asg_actuator(aws_api, clock).resize("spot", 2, "up")
    assert aws_api.calls("SetDesiredCapacity") == 0
    clock.advance(timedelta(minutes=10))
    assert asg_actuator(aws_api, clock).resize("spot", 2, "later").status is ActionStatus.STARTED
    assert aws_api.group("gpu-spot")["DesiredCapacity"] == 2


def test_a_drain_terminates_exactly_the_drained_instance(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    group = aws_api.add_nodegroup("ml", "p5", nodes=3)
    ids = [i["InstanceId"] for i in aws_api.group(group)["Instances"]]
    found = aws_api.direct.ec2.describe_instances(InstanceIds=ids)["Reservations"]
    dns = {i["InstanceId"]: i["PrivateDnsName"] for r in found for i in r["Instances"]}
    for instance_id, name in dns.items():
        kube_api.put("nodes", objs.node(name, "unused", labels={EKS_NODEGROUP_LABEL: "p5"}, instance=instance_id))
    clock = SimulatedClock(T0)
    eks = eks_actuator(aws_api, clock)
    drainer = KubernetesNodeDrainer(
        KubernetesApi(kube_client), clock, {"od": "p5"}, eks, pool_label=EKS_NODEGROUP_LABEL
    )
    victim = ids[1]

    assert (
        drainer.drain("od", dns[victim], "drain-1").status is ActionStatus.STARTED
    )  # cordoned and empty: removed at the drain's next step, once its pods are read again
    assert drainer.drain("od", dns[victim], "drain-1").status is ActionStatus.DONE

    left = aws_api.group(group)
    assert sorted(i["InstanceId"] for i in left["Instances"]) == sorted(set(ids) - {victim})
    assert left["DesiredCapacity"] == 2
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 1
    (state,) = eks.list_pools()
    assert (state.ready_units, state.target_units) == (2, 2)  # the node group's size followed its group
    with pytest.raises(TransientActuatorError, match="no EC2 instance has the private DNS name"):
        eks.delete_nodes("od", ["no-such-node"], "bad")


def test_a_node_group_health_issue_naming_a_capacity_shortage_is_failed_units(aws_api: FakeAwsApi) -> None:
    group = aws_api.add_nodegroup("ml", "p5", nodes=1)
    clock = SimulatedClock(T0)
    aws_api.arm_late_stockout()
    eks_actuator(aws_api, clock).resize("od", 3, "up")
    aws_api.finish_operations()
    actuator = eks_actuator(aws_api, clock)
    assert actuator.list_pools()[0].failed_units == 0  # launches still under way: nothing says they cannot
    aws_api.health_issue(
        "p5",
        "AsgInstanceLaunchFailures",
        "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient "
        "p5.48xlarge capacity in the Availability Zone you requested (us-east-1a).",
    )
    (state,) = actuator.list_pools()
    assert (state.ready_units, state.target_units, state.failed_units) == (1, 1, 2)
    with pytest.raises(CapacityUnavailable, match="AsgInstanceLaunchFailures"):
        actuator.resize("od", 4, "up-again")
    assert aws_api.group(group)["DesiredCapacity"] == 1
    assert aws_api.calls("UpdateNodegroupConfig") == 2  # the scale-up, then the removal of what cannot launch


def test_a_drained_node_at_the_group_minimum_is_uncordoned_at_the_drain_timeout_and_not_drained_again(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    """What docs/aws.md says of a group whose minimum size is raised during a drain: the empty node is kept
    cordoned while its removal is retried, back in service at the drain timeout (not terminated: the group would
    only replace it); once it has been idle for the stabilization window again, its drain is not started."""
    group = aws_api.add_nodegroup("ml", "p5", nodes=2, min_size=1)
    ids = [i["InstanceId"] for i in aws_api.group(group)["Instances"]]
    found = aws_api.direct.ec2.describe_instances(InstanceIds=ids)["Reservations"]
    dns = {i["InstanceId"]: i["PrivateDnsName"] for r in found for i in r["Instances"]}
    for instance_id, name in dns.items():
        kube_api.put("nodes", objs.node(name, "unused", labels={EKS_NODEGROUP_LABEL: "p5"}, instance=instance_id))
    clock = SimulatedClock(T0)
    eks = eks_actuator(aws_api, clock)
    drainer = KubernetesNodeDrainer(
        KubernetesApi(kube_client), clock, {"od": "p5"}, eks, timedelta(minutes=15), pool_label=EKS_NODEGROUP_LABEL
    )
    window = timedelta(minutes=10)
    drains = NodeDrains({"od": drainer}, window)

    def cordoned() -> list[str]:
        return sorted(n for n in dns.values() if (kube_api.get("nodes", n) or {})["spec"].get("unschedulable"))

    def observe() -> tuple[str, ...]:
        (state,) = eks.list_pools()
        seen, _ = drains.observe({"od": state}, clock.now())
        return seen["od"].idle_nodes

    victim = dns[ids[0]]
    kube_api.clock = clock.now  # its evicted pod finishes terminating as the clock passes its grace period
    kube_api.put("pods", objs.pod("web", victim, labels={"app": "web"}, owner_kind="ReplicaSet"))
    observe()
    clock.advance(window)
    assert victim in observe()
    first = drains.scale_down(Resize("od", 2, 1, "idle", "r1"), clock.now(), [victim])
    assert [r.status for r in first.results] == [ActionStatus.STARTED]  # its pod shuts down first
    aws_api.set_bounds(group, min_size=2, max_size=16)  # meanwhile an operator raised the minimum size
    clock.advance(timedelta(minutes=1))
    first = drains.continue_pending(clock.now())
    assert [(r.status, "minimum size 2" in (r.error or "")) for r in first.results] == [(ActionStatus.FAILED, True)]
    for _ in range(13):  # retried every tick, the node cordoned and empty
        clock.advance(timedelta(minutes=1))
        step = drains.continue_pending(clock.now())
        assert [r.status for r in step.results] == [ActionStatus.FAILED] and drains.pending
        assert cordoned() == [victim]
    clock.advance(timedelta(minutes=1))
    (gave_up,) = drains.continue_pending(clock.now()).results
    assert gave_up.status is ActionStatus.FAILED
    assert gave_up.detail.startswith("removing the empty node still fails after 0:15:00")
    assert "minimum size 2" in gave_up.detail and gave_up.detail.endswith(f"node {victim} uncordoned")
    assert cordoned() == [] and not drains.pending
    assert aws_api.calls("TerminateInstanceInAutoScalingGroup") == 0
    assert aws_api.group(group)["DesiredCapacity"] == 2

    assert victim not in observe()  # held for one stabilization window after a failed drain
    clock.advance(window)
    assert victim in observe()
    clock.advance(window)
    observe()
    again = drains.scale_down(Resize("od", 2, 1, "idle", "r2"), clock.now(), [victim])
    assert [r.status for r in again.results] == [ActionStatus.REJECTED] and cordoned() == []
    assert "minimum size 2" in again.results[0].detail
