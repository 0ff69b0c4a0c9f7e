"""Demand groups: classes that may use exactly the same pools are planned together.

What such classes need from their pools is the quantile of their summed demand, which is far below the sum of
their separate quantiles (tenants rarely peak together). The loop forecasts one aggregate series per group of
two or more classes; a class alone in its group is planned on its own forecast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from models import PoolSpec

GROUP_PREFIX = "pool-group:"


@dataclass(frozen=True)
class DemandGroup:
    name: str
    members: tuple[str, ...]
    pools: frozenset[str]

    @property
    def is_aggregate(self) -> bool:
        return len(self.members) > 1


def demand_groups(classes: Sequence[str], pools: Sequence[PoolSpec]) -> tuple[DemandGroup, ...]:
    """Partition classes by the exact set of pools that may serve them, in a stable order."""
    by_pools: dict[frozenset[str], list[str]] = {}
    for name in classes:
        eligible = frozenset(p.pool_id for p in pools if name in p.serves)
        by_pools.setdefault(eligible, []).append(name)
    groups = []
    for eligible, members in sorted(by_pools.items(), key=lambda item: sorted(item[1])):
        ordered = tuple(sorted(members))
        name = ordered[0] if len(ordered) == 1 else GROUP_PREFIX + "+".join(sorted(eligible))
        groups.append(DemandGroup(name, ordered, eligible))
    return tuple(groups)


def single_class_groups(classes: Sequence[str], pools: Sequence[PoolSpec]) -> tuple[DemandGroup, ...]:
    """Every class planned on its own (no aggregate forecasts)."""
    return tuple(
        DemandGroup(name, (name,), frozenset(p.pool_id for p in pools if name in p.serves)) for name in classes
    )
