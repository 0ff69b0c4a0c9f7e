"""Building the AWS actuators from the ``aws`` settings: the boto3 clients, one adapter per kind of pool, and which
Kubernetes node label tells each pool's nodes apart (for draining). Nothing connects here; the clients connect on
first use.

Credentials come from boto3's standard chain only: in the cluster, the service account's IAM role through IRSA
(``AWS_ROLE_ARN`` + ``AWS_WEB_IDENTITY_TOKEN_FILE``) or EKS Pod Identity (``AWS_CONTAINER_CREDENTIALS_FULL_URI``),
never keys in the configuration. Every read is bounded (connect and read timeouts) and retried by botocore's
standard mode, which backs off on throttling; what still fails is translated by ``actuators.aws_errors``. A write
(a desired capacity, a termination, a node group update) is one attempt that ends within the write's time limit
(``actuators.write_window``): a retry could land after the leader's deadline, and the next tick plans again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from actuators.aws_asg import Ec2AutoScalingGroupActuator
from actuators.aws_eks import EksNodegroupActuator
from actuators.aws_groups import AutoScalingGroups
from actuators.base import Actuator
from actuators.kubernetes_drain import NodeRemover
from config.aws import EKS_NODEGROUP_LABEL, AwsSettings
from models.clock import Clock


@dataclass(frozen=True)
class DrainTarget:
    """How a drainer finds one pool's nodes (``label`` = ``value``) and which adapter removes them."""

    label: str
    value: str
    remover: NodeRemover


@dataclass(frozen=True)
class AwsActuators:
    routes: dict[str, Actuator] = field(default_factory=dict)
    drains: dict[str, DrainTarget] = field(default_factory=dict)
    # Advisory checks run once at start (``DaemonParts.checks``): a group over several Availability Zones whose
    # AZRebalance process is not suspended may terminate a node of its own choosing after each drained node's.
    checks: list[Callable[[], Sequence[str]]] = field(default_factory=list)


def build_aws_actuators(aws: AwsSettings, clock: Clock) -> AwsActuators:
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=5, read_timeout=20, retries={"mode": "standard", "max_attempts": 3})
    session = boto3.session.Session(region_name=aws.region)
    options: dict[str, Any] = {"config": config}
    if aws.endpoint is not None:
        options["endpoint_url"] = aws.endpoint
    autoscaling = session.client("autoscaling", **options)
    groups = AutoScalingGroups(
        autoscaling, session.client("ec2", **options), bounded_clients(session, "autoscaling", aws)
    )
    built = AwsActuators()
    if aws.nodegroups:
        assert aws.cluster is not None  # checked with the configuration
        eks_client = session.client("eks", **options)
        writes = bounded_clients(session, "eks", aws)
        # The daemon drains every AWS pool's nodes before they go (a drain target each, below): never a blind shrink.
        eks = EksNodegroupActuator(eks_client, groups, aws.cluster, aws.nodegroups, clock, writes, drained=True)
        built.checks.append(eks.rebalance_warnings)
        for m in aws.nodegroups:
            built.routes[m.pool] = eks
            built.drains[m.pool] = DrainTarget(EKS_NODEGROUP_LABEL, m.nodegroup, eks)
    if aws.auto_scaling_groups:
        asg = Ec2AutoScalingGroupActuator(groups, aws.auto_scaling_groups, clock, drained=True)
        built.checks.append(asg.rebalance_warnings)
        for a in aws.auto_scaling_groups:
            built.routes[a.pool] = asg
            built.drains[a.pool] = DrainTarget(a.node_label, a.group, asg)
    return built


def bounded_clients(session: Any, service: str, aws: AwsSettings) -> Callable[[float], Any]:
    """Clients of ``service`` for writes, one per time limit (the daemon has one): a single attempt, connecting and
    reading within half the limit each, so a write has ended, answered or given up, within its limit."""
    from botocore.config import Config

    made: dict[float, Any] = {}

    def client(timeout: float) -> Any:
        if timeout not in made:
            config = Config(
                connect_timeout=timeout / 2,
                read_timeout=timeout / 2,
                retries={"mode": "standard", "total_max_attempts": 1},
            )
            endpoint = {"endpoint_url": aws.endpoint} if aws.endpoint is not None else {}
            made[timeout] = session.client(service, config=config, **endpoint)
        return made[timeout]

    return client
