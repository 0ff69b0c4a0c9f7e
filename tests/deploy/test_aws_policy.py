"""The IAM policy in ``deploy/aws/leadtime-iam-policy.json`` allows exactly the AWS actions that the boto3 calls in
``actuators/`` need: a new call without its action, or an action no call needs, fails here. Writes are allowed
only on named resources (the mapped Auto Scaling groups and node groups), never on ``*``.

Which IAM action each call needs: every boto3 method is the API operation of the same name (``set_desired_capacity``
is ``SetDesiredCapacity``), and each API operation is authorized by the IAM action of the same name in its service
prefix, per the Service Authorization Reference ("Actions, resources, and condition keys for Amazon EC2 Auto
Scaling", "... for Amazon EC2", "... for Amazon Elastic Kubernetes Service"). The Describe actions of Auto Scaling
and EC2 support no resource-level permissions there, so they are granted on ``*``.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.deploy import sdk_calls

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "deploy" / "aws" / "leadtime-iam-policy.json"
# The attribute each boto3 client is kept under in the actuators, and its IAM service prefix.
CLIENTS = {"_autoscaling": "autoscaling", "_ec2": "ec2", "_eks": "eks"}
READ_ONLY_ON_ANY_RESOURCE = {"autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeScalingActivities"}
READ_ONLY_ON_ANY_RESOURCE |= {"ec2:DescribeInstances"}


def calls_in(source: str) -> set[tuple[str, str]]:
    return sdk_calls.calls_in(source, CLIENTS)


def action(client: str, method: str) -> str:
    return f"{CLIENTS[client]}:{''.join(part.capitalize() for part in method.split('_'))}"


def _needed() -> set[str]:
    calls = {c for path in sorted((ROOT / "actuators").glob("*.py")) for c in calls_in(path.read_text())}
    return {action(client, method) for client, method in calls}


def _statements() -> list[dict[str, object]]:
    statements: list[dict[str, object]] = json.loads(POLICY.read_text())["Statement"]
    return statements


def test_the_scan_finds_the_calls_it_should() -> None:
    source = "class A:\n    def f(self):\n        return call('p', self._autoscaling.set_desired_capacity, X=1)\n"
    assert calls_in(source) == {("_autoscaling", "set_desired_capacity")}
    writes = "class A:\n    def f(self):\n        self._eks_writes(t).update_nodegroup_config(X=1)\n"
    assert calls_in(writes) == {("_eks", "update_nodegroup_config")}
    assert action("_autoscaling", "terminate_instance_in_auto_scaling_group") == (
        "autoscaling:TerminateInstanceInAutoScalingGroup"
    )
    assert action("_eks", "update_nodegroup_config") == "eks:UpdateNodegroupConfig"


def test_the_policy_allows_exactly_the_actions_the_adapters_call() -> None:
    allowed = {a for s in _statements() if s["Effect"] == "Allow" for a in s["Action"]}  # type: ignore[attr-defined]
    needed = _needed()
    assert needed, "no AWS call found in actuators/"
    assert needed - allowed == set(), "calls without an allowed action"
    assert allowed - needed == set(), "allowed actions no call needs"


def test_only_reads_without_resource_level_permissions_are_allowed_on_any_resource() -> None:
    for statement in _statements():
        resources = statement["Resource"]
        if "*" in ([resources] if isinstance(resources, str) else resources):  # type: ignore[operator]
            assert set(statement["Action"]) <= READ_ONLY_ON_ANY_RESOURCE  # type: ignore[call-overload]
