"""Pools: the places capacity lives, and their observed state."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from models.demand import AcceleratorFamily


class PoolKind(StrEnum):
    """What infrastructure a pool is, which decides how it scales."""

    ON_PREM = "on-prem"  # a fixed node group, sunk cost; never resized
    GPU_NODE_POOL = "gpu-node-pool"  # a GKE node pool resized by node count
    TPU_SLICE_GROUP = "tpu-slice-group"  # identical multi-host slices, each created and deleted whole
    TPU_QUEUED_RESOURCE = "tpu-queued-resource"  # Cloud TPU queued resources of one accelerator type


class CapacityTier(StrEnum):
    """How capacity is bought; also the order in which it is filled (cheapest commitment first)."""

    ON_PREM = "on-prem"
    RESERVED = "reserved"
    SPOT = "spot"
    ON_DEMAND = "on-demand"

    @property
    def fill_rank(self) -> int:
        return _FILL_ORDER.index(self)


_FILL_ORDER = [CapacityTier.ON_PREM, CapacityTier.RESERVED, CapacityTier.SPOT, CapacityTier.ON_DEMAND]


@dataclass(frozen=True)
class PoolSpec:
    """What a pool is and what it may do: fixed for the life of a configuration."""

    pool_id: str
    kind: PoolKind
    tier: CapacityTier
    family: AcceleratorFamily
    chips_per_unit: int
    min_units: int
    max_units: int
    price_per_unit_hour_usd: float
    lead_time: timedelta
    serves: tuple[str, ...]
    spot_interruption_per_hour: float = 0.0

    @property
    def price_per_chip_hour_usd(self) -> float:
        return self.price_per_unit_hour_usd / self.chips_per_unit

    @property
    def fill_key(self) -> tuple[int, float, str]:
        """Sort key for cheapest-first filling: tier, then price per chip-hour, then name for determinism."""
        return (self.tier.fill_rank, self.price_per_chip_hour_usd, self.pool_id)

    def clamp(self, units: int) -> int:
        return max(self.min_units, min(self.max_units, units))


@dataclass(frozen=True)
class ZoneState:
    """One zone of a pool that spans zones (a GKE node pool's instance group in that zone), as observed.

    ``backoff_until`` is set while the zone is left out of scale-ups after it ran out of capacity.
    ``failed_for_capacity`` says that the actuator read one of its failed units as failed for want of capacity or
    quota, which backs the zone off; units failed for a reason of their own do not, unless the reason is confined to
    the zone and another zone of the pool takes its share (``failed_in_zone``: a reservation of the zone used up),
    while a reason every zone meets alike (a region's subnet out of addresses) never does. Where the actuator gives no
    message for each of the pool's failed units it cannot tell, and they count as a stockout whatever these say
    (``PoolState.failed_for_capacity``).
    """

    zone: str
    ready_units: int
    target_units: int
    failed_units: int = 0
    backoff_until: datetime | None = None
    failed_for_capacity: bool = False
    failed_in_zone: bool = False


@dataclass(frozen=True)
class PoolState:
    """A pool as observed at ``observed_at``.

    ``ready_units`` accept work now; ``target_units`` is what was last asked for (ready + in flight). A unit
    that is provisioning counts in ``target_units`` but not in ``ready_units``. ``waiting_units`` are the units of
    ``target_units`` the provider has not started to provision and does not bill (a Cloud TPU queued resource
    waiting for resources); what is billed is ``billed_units``. ``failed_units`` (a failed or suspended slice or
    queued resource) count in neither; they are reported so a person can be told. ``failed_messages`` is what the
    provider says of each of them, one per failed unit, where the actuator reads it (empty where it does not);
    ``failed_for_capacity`` says that the actuator read one of them as a stockout or an exhausted quota, as only it
    knows its provider's words for those: the agent backs a pool off for its failed units unless there is a message
    for each and the actuator read none of them so. ``failed_for_quota`` says that it read one of them as a quota used
    up, which unlike a stockout does not clear by itself: the stockout alert tells the operator to have it raised.
    ``zones``
    breaks the counts down per zone for pools that span zones (empty otherwise). ``idle_nodes`` names the idle
    units in the order of ``idle_since`` where they are known (pools that shrink by drains), else is empty.
    ``broken_units`` (name, what is wrong) cannot serve and have work on them (a TPU slice in error, short of hosts,
    its job's pod on it): they count in neither ready nor target units, so the planner buys others in their place,
    are never removed by the agent while busy, and are reported so a person can decide to delete them; they are
    paid for, so they count in ``billed_units`` and take room from the pool's ``max_units``. ``missing_zones``
    (zone, what is wrong) are zones the pool lists whose units cannot be read (a GKE node pool's instance group that
    Compute does not find): left out of every count and of ``zones``, and reported so a person can be told.
    ``draining_units`` are nodes being drained that the agent took out of ready and target units (``agent.drains``:
    they were already asked to go); the cloud bills them until each drain deletes its node, so they count in
    ``billed_units``. A pool as read from the cloud has none: its target still counts them. ``takeable_units`` are
    those of them a scale-up takes back before it buys (drains of idle nodes, ``NodeDrains.take_back``): already
    billed, they cost nothing more when they serve again. ``recreating_units`` are those of the units in flight
    (in ``target_units``, not ready) that the provider is recreating, not creating: a repair of a unit that ran (a GKE
    node pool's or TPU slice's instances under RECREATING, an AWS group's health-check replacement), never a scale-up;
    0 where the actuator cannot tell them apart (Cloud TPU queued resources). ``refreshing_units`` are others of them
    that run and are refreshed in place, neither created nor recreated (an AWS instance whose root volume an instance
    refresh replaces), never a scale-up either; 0 where there are none.
    """

    pool_id: str
    observed_at: datetime
    ready_units: int
    target_units: int
    in_flight_operation: str | None = None
    idle_units: int = 0
    idle_since: tuple[datetime, ...] = field(default_factory=tuple)
    failed_units: int = 0
    zones: tuple[ZoneState, ...] = ()
    idle_nodes: tuple[str, ...] = ()
    waiting_units: int = 0
    broken_units: tuple[tuple[str, str], ...] = ()
    failed_messages: tuple[str, ...] = ()
    missing_zones: tuple[tuple[str, str], ...] = ()
    draining_units: int = 0
    takeable_units: int = 0
    failed_for_capacity: bool = False
    failed_for_quota: bool = False
    recreating_units: int = 0
    refreshing_units: int = 0

    @property
    def provisioning_units(self) -> int:
        return max(0, self.target_units - self.ready_units)

    @property
    def billed_units(self) -> int:
        """The units the provider bills now: ready and provisioning ones, not those still waiting for resources,
        and the broken ones, whole (a slice short of hosts is charged as a whole slice: an estimate on the safe
        side), and the nodes being drained out of the target."""
        return max(0, self.target_units - self.waiting_units) + len(self.broken_units) + self.draining_units
