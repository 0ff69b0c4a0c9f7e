"""AWS settings: the region and EKS cluster the agent changes, and how each of our pools maps to an EKS managed node
group or to an EC2 Auto Scaling group of self-managed GPU nodes.

Credentials never appear here: the AWS clients take them from the standard chain (in the cluster, the service
account's IAM role through IRSA or EKS Pod Identity). Prices and the Spot interruption rate are the pool's own
(``pools[].price_per_unit_hour_usd``, ``tier: spot``, ``spot_interruption_per_hour``). Cross-checks against the
pools section are in ``config.aws_checks``, one problem per key.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import BeforeValidator, ConfigDict, Field, PlainSerializer

from config.durations import format_duration, parse_duration
from config.fields import NumbersOnly

_REGION = r"^[a-z]{2}(-[a-z]+)+-\d$"
_LABEL_KEY = r"^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
_Duration = Annotated[timedelta, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)]
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"  # set by EKS on every node of a managed node group


class _Section(NumbersOnly):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodegroupMapping(_Section):
    """An EKS managed node group of the cluster, resized through its scaling config."""

    pool: str
    nodegroup: str = Field(min_length=1, max_length=63)


class AutoScalingGroupMapping(_Section):
    """An EC2 Auto Scaling group of self-managed GPU nodes, resized through its desired capacity. Its nodes carry
    the Kubernetes label ``node_label`` (key) with the group's name as value, so idle ones can be found and drained."""

    pool: str
    group: str = Field(min_length=1, max_length=255)
    node_label: str = Field(default="leadtime.io/auto-scaling-group", pattern=_LABEL_KEY)


class AwsSettings(_Section):
    region: str = Field(pattern=_REGION)
    cluster: str | None = Field(default=None, min_length=1)  # the EKS cluster; needed for nodegroups
    nodegroups: tuple[NodegroupMapping, ...] = ()
    auto_scaling_groups: tuple[AutoScalingGroupMapping, ...] = ()
    endpoint: str | None = None  # one API endpoint for every AWS client (a local test server)
    # A node group shrinks only by draining idle nodes; a drain still blocked by disruption budgets after this long
    # gives up and uncordons the node.
    drain_timeout: _Duration = timedelta(minutes=15)

    @property
    def pools(self) -> frozenset[str]:
        return frozenset(self.mapped_in)

    @property
    def mapped_in(self) -> dict[str, str]:
        """Each mapped pool with the key of the section that maps it (its first mapping)."""
        sections = (("aws.nodegroups", self.nodegroups), ("aws.auto_scaling_groups", self.auto_scaling_groups))
        found: dict[str, str] = {}
        for key, mappings in sections:
            for mapping in mappings:
                found.setdefault(mapping.pool, key)
        return found
