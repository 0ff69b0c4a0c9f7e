"""AWS settings: the region and EKS cluster the agent changes, and how each of our pools maps to an EKS managed node
group or to an EC2 Auto Scaling group of self-managed GPU nodes.

Credentials never appear here: the AWS clients take them from the standard chain (in the cluster, the service
account's IAM role through IRSA or EKS Pod Identity). Prices and the Spot interruption rate are the pool's own
(``pools[].price_per_unit_hour_usd``, ``tier: spot``, ``spot_interruption_per_hour``). Cross-checks against the
pools section are in ``check_aws`` (called by ``config.rules``), one problem per key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated

from pydantic import BeforeValidator, ConfigDict, Field, PlainSerializer

from config.durations import format_duration, parse_duration
from config.fields import NumbersOnly
from models import ConfigProblem, PoolKind

if TYPE_CHECKING:
    from config.schema import PoolSettings

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
        return frozenset([m.pool for m in self.nodegroups] + [m.pool for m in self.auto_scaling_groups])


def check_aws(aws: AwsSettings | None, pools: Sequence[PoolSettings]) -> list[ConfigProblem]:
    return [] if aws is None else list(_problems(aws, pools))


def _problems(aws: AwsSettings, pools: Sequence[PoolSettings]) -> Iterator[ConfigProblem]:
    by_id = {p.id: p for p in pools}
    mapped: Counter[str] = Counter()
    sections: dict[str, Sequence[NodegroupMapping | AutoScalingGroupMapping]] = {
        "nodegroups": aws.nodegroups,
        "auto_scaling_groups": aws.auto_scaling_groups,
    }
    for section, mappings in sections.items():
        for i, mapping in enumerate(mappings):
            at = f"aws.{section}[{i}]"
            mapped[mapping.pool] += 1
            pool = by_id.get(mapping.pool)
            if pool is None:
                yield ConfigProblem(f"{at}.pool", f"unknown pool {mapping.pool!r} (known: {', '.join(by_id)})")
            elif pool.kind is not PoolKind.GPU_NODE_POOL:
                yield ConfigProblem(
                    f"{at}.pool", f"pool {pool.id!r} is of kind {pool.kind}; aws.{section} maps gpu-node-pool pools"
                )
    for pool_id, count in mapped.items():
        if count > 1:
            yield ConfigProblem("aws", f"pool {pool_id!r} is mapped {count} times; map each pool once")
    if aws.nodegroups and aws.cluster is None:
        yield ConfigProblem("aws.cluster", "EKS managed node groups need the name of their EKS cluster")
    names = [m.nodegroup for m in aws.nodegroups] + [m.group for m in aws.auto_scaling_groups]
    for name, count in Counter(names).items():
        if count > 1:
            yield ConfigProblem("aws", f"name {name!r} is used by {count} mappings; names must be unique")
