"""Cross-checks of the aws section against the pools section, one problem per key: each mapping names a known GPU
node pool, each pool is mapped once, names are unique, and managed node groups name their EKS cluster. Called by
``config.rules``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from config.aws import AutoScalingGroupMapping, AwsSettings, NodegroupMapping
from config.schema import PoolSettings
from models import ConfigProblem, PoolKind


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
