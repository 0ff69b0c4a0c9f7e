"""A drained node is terminated even when a recently terminated instance had its private IP, so its private DNS
name: EC2 lists a terminated instance for about an hour and gives its IP again, and the Kubernetes node name is
the live instance's private DNS name. The whole drain runs: the real kubernetes client against the local
Kubernetes API, boto3 against moto behind the proxy of ``tests.fakes.aws_api``."""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client as k8s

from actuators.kubernetes_drain import KubernetesNodeDrainer
from config.aws import EKS_NODEGROUP_LABEL
from kube import KubernetesApi
from models import ActionStatus
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import eks_actuator
from tests.fakes import kube_objects as objs
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def test_a_drained_node_whose_ip_a_terminated_instance_had_is_terminated(
    aws_api: FakeAwsApi, kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    group = aws_api.add_nodegroup("ml", "p5", nodes=3)
    ec2 = aws_api.direct.ec2
    ids = sorted(i["InstanceId"] for i in aws_api.group(group)["Instances"])
    found = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    info = {i["InstanceId"]: i for r in found for i in r["Instances"]}
    for instance_id, inst in info.items():
        labels = {EKS_NODEGROUP_LABEL: "p5"}
        kube_api.put("nodes", objs.node(inst["PrivateDnsName"], "unused", labels=labels, instance=instance_id))
    victim = ids[1]
    node = str(info[victim]["PrivateDnsName"])
    earlier = ec2.run_instances(
        ImageId="ami-0123456789abcdef0",
        MinCount=1,
        MaxCount=1,
        InstanceType="p5.48xlarge",
        PrivateIpAddress=info[victim]["PrivateIpAddress"],
    )["Instances"][0]["InstanceId"]
    ec2.terminate_instances(InstanceIds=[earlier])  # an earlier node on that IP, terminated less than an hour ago
    clock = SimulatedClock(T0)
    drainer = KubernetesNodeDrainer(
        KubernetesApi(kube_client), clock, {"od": "p5"}, eks_actuator(aws_api, clock), pool_label=EKS_NODEGROUP_LABEL
    )

    assert (
        drainer.drain("od", node, "drain-1").status is ActionStatus.STARTED
    )  # cordoned and empty: removed at the drain's next step, once its pods are read again
    result = drainer.drain("od", node, "drain-1")

    assert result.status is ActionStatus.DONE
    assert f"terminating {node} ({victim})" in result.detail
    left = aws_api.group(group)
    assert victim not in {i["InstanceId"] for i in left["Instances"] if i["LifecycleState"] == "InService"}
    assert (aws_api.calls("TerminateInstanceInAutoScalingGroup"), left["DesiredCapacity"]) == (1, 2)
