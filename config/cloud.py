"""Cloud settings: which GKE cluster and Cloud TPU location the agent changes, and how each of our pools maps to a
GKE node pool, a group of TPU slices (one node pool each) or a group of Cloud TPU queued resources.

Cross-checks against the pools section are in ``check_cloud`` (called by ``config.rules``), one problem per key.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, PlainSerializer, model_validator

from config.durations import format_duration, parse_duration
from config.fields import NumbersOnly
from models import CapacityTier, ConfigProblem, PoolKind

if TYPE_CHECKING:
    from config.schema import PoolSettings

_NAME = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
_ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")  # a Compute Engine zone (us-central1-a); a region has no suffix
_Duration = Annotated[timedelta, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)]

# Chips a Cloud TPU accelerator type counts, by family. The number in a type counts TensorCores, which for v2, v3, v4
# and v5p are 2 per chip (v5p-128 is 64 chips), and for v5e (v5litepod) and v6e are 1 per chip, so the number is
# the chip count. Sources: cloud.google.com/tpu/docs/v2 (a pod is "up to 256 chips (512 TensorCores)"; the type is
# the version and the number of TPU cores), /tpu/docs/v3 and /tpu/docs/v4 ("Each ... chip contains two TensorCores"),
# /tpu/docs/v5p (the 2x2x1 slice: 8 cores, 4 chips), /tpu/docs/v5e ("Each v5e chip contains one TensorCore"; the
# type is v$VERSION_NUMBER-$CHIP_COUNT) and /tpu/docs/v6e ("Each v6e chip contains one TensorCore"; v6e-8 is 8
# chips). Families not listed here are not checked.
_TENSORCORES_PER_CHIP = {"v2": 2, "v3": 2, "v4": 2, "v5p": 2, "v5litepod": 1, "v6e": 1}
# A GKE TPU machine type ends in its chips per VM: ct5lp-hightpu-4t has 4, ct6e-standard-8t 8, ct6e-standard-1t 1
# (cloud.google.com/tpu/docs/v5e and /tpu/docs/v6e, the machine type (GKE API) of each VM type and slice shape).
_MACHINE_CHIPS = re.compile(r"[a-z0-9-]+-([1-9][0-9]*)t")


class _Section(NumbersOnly):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class NodePoolMapping(_Section):
    """A GKE node pool resized by node count (GPU, or single-host TPU). ``gke_autoscaling`` decides what to do when
    GKE's own autoscaler is on for it: ``refuse`` (the default: the agent will not fight it) or ``move-bounds``
    (the agent sets the autoscaler's min and max to its target instead of the size)."""

    pool: str
    node_pool: str = Field(pattern=_NAME, max_length=40)
    gke_autoscaling: Literal["refuse", "move-bounds"] = "refuse"


class TpuSliceGroupMapping(_Section):
    """Identical multi-host TPU slices, each its own node pool named ``<group>-<n>``, created and deleted whole."""

    pool: str
    group: str = Field(pattern=_NAME, max_length=36)
    machine_type: str = Field(min_length=1)
    tpu_topology: str = Field(pattern=r"^\d+(x\d+){1,2}$")
    chips_per_host: int = Field(default=4, ge=1)
    zone: str | None = None
    spot: bool = False

    @model_validator(mode="before")
    @classmethod
    def _chips_per_host_from_machine_type(cls, data: Any) -> Any:
        """Unset, ``chips_per_host`` is what the machine type's ``-<N>t`` suffix says, else 4."""
        if isinstance(data, dict) and "chips_per_host" not in data:
            chips = machine_type_chips(data.get("machine_type"))
            if chips is not None:
                return {**data, "chips_per_host": chips}
        return data

    @property
    def chips_per_slice(self) -> int:
        return math.prod(int(d) for d in self.tpu_topology.split("x"))

    @property
    def hosts_per_slice(self) -> int:
        return self.chips_per_slice // self.chips_per_host


class QueuedResourceMapping(_Section):
    """Cloud TPU queued resources of one accelerator type, named ``<group>-<n>``, in ``zone``."""

    pool: str
    group: str = Field(pattern=_NAME, max_length=40)
    zone: str = Field(min_length=1)
    accelerator_type: str = Field(min_length=1)
    runtime_version: str = Field(min_length=1)
    chips: int = Field(ge=1)
    spot: bool = False


class CloudSettings(_Section):
    project: str = Field(min_length=1)
    location: str = Field(min_length=1)
    cluster: str = Field(min_length=1)
    node_pools: tuple[NodePoolMapping, ...] = ()
    tpu_slice_groups: tuple[TpuSliceGroupMapping, ...] = ()
    queued_resources: tuple[QueuedResourceMapping, ...] = ()
    endpoint: str | None = None  # one API endpoint for every Google client (a local test server)
    # A node pool shrinks only by draining idle nodes; a drain still blocked by disruption budgets after this long
    # gives up and uncordons the node.
    drain_timeout: _Duration = timedelta(minutes=15)
    # A zone of a node pool that ran out of capacity is left out of that pool's scale-ups for this long; its share
    # goes to the pool's other zones.
    zone_backoff: _Duration = timedelta(minutes=30)

    @property
    def cluster_path(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.cluster}"


def machine_type_chips(machine_type: object) -> int | None:
    """TPU chips per VM of a GKE TPU machine type, from its ``-<N>t`` suffix (None without one)."""
    found = _MACHINE_CHIPS.fullmatch(machine_type) if isinstance(machine_type, str) else None
    return int(found[1]) if found else None


def accelerator_type_chips(accelerator_type: str) -> int | None:
    """Chips of a Cloud TPU accelerator type of a known family (None for another family). Raises ValueError for
    a known family whose TensorCores are not a whole number of chips."""
    found = re.fullmatch(r"([a-z0-9]+)-([0-9]+)", accelerator_type)
    per_chip = _TENSORCORES_PER_CHIP.get(found[1]) if found else None
    if found is None or per_chip is None:
        return None
    tensorcores = int(found[2])
    if tensorcores % per_chip:
        raise ValueError(f"{tensorcores} TensorCores of {found[1]} are not whole chips of {per_chip} TensorCores")
    return tensorcores // per_chip


_KINDS = {
    "node_pools": (PoolKind.GPU_NODE_POOL,),
    "tpu_slice_groups": (PoolKind.TPU_SLICE_GROUP,),
    "queued_resources": (PoolKind.TPU_QUEUED_RESOURCE,),
}


def check_cloud(
    cloud: CloudSettings | None, pools: Sequence[PoolSettings], elsewhere: frozenset[str] = frozenset()
) -> list[ConfigProblem]:
    """``elsewhere``: pools mapped to another cloud's resources (the ``aws`` section), not expected here."""
    return [] if cloud is None else list(_problems(cloud, pools, elsewhere))


def _problems(
    cloud: CloudSettings, pools: Sequence[PoolSettings], elsewhere: frozenset[str]
) -> Iterator[ConfigProblem]:
    by_id = {p.id: p for p in pools}
    index = {p.id: i for i, p in enumerate(pools)}
    mapped: Counter[str] = Counter()
    for section, kinds in _KINDS.items():
        mappings: tuple[NodePoolMapping | TpuSliceGroupMapping | QueuedResourceMapping, ...] = getattr(cloud, section)
        for i, mapping in enumerate(mappings):
            at = f"cloud.{section}[{i}]"
            mapped[mapping.pool] += 1
            pool = by_id.get(mapping.pool)
            if pool is None:
                yield ConfigProblem(f"{at}.pool", f"unknown pool {mapping.pool!r} (known: {', '.join(by_id)})")
                continue
            if pool.kind not in kinds:
                yield ConfigProblem(
                    f"{at}.pool", f"pool {pool.id!r} is of kind {pool.kind}; cloud.{section} maps {kinds[0]} pools"
                )
            if isinstance(mapping, TpuSliceGroupMapping | QueuedResourceMapping):
                yield from _spot_problems(at, mapping, pool, f"pools[{index[pool.id]}]")
            if isinstance(mapping, TpuSliceGroupMapping):
                yield from _slice_problems(at, mapping, pool)
                if mapping.zone is None and not _ZONE.fullmatch(cloud.location):
                    yield ConfigProblem(
                        f"{at}.zone",
                        f"required: cloud.location {cloud.location!r} is a region, and GKE creates a node pool "
                        "without a zone in every zone of a regional cluster (each slice would get its hosts in each "
                        "zone); name the zone of the slices, e.g. 'us-central1-a'",
                    )
            if isinstance(mapping, QueuedResourceMapping):
                yield from _queued_problems(at, mapping, pool)
    for pool_id, count in mapped.items():
        if count > 1:
            yield ConfigProblem("cloud", f"pool {pool_id!r} is mapped {count} times; map each pool once")
    cloud_kinds = {k for kinds in _KINDS.values() for k in kinds}
    for i, pool in enumerate(pools):
        if pool.kind in cloud_kinds and pool.id not in mapped and pool.id not in elsewhere:
            yield ConfigProblem(f"pools[{i}]", f"pool {pool.id!r} ({pool.kind}) has no mapping in the cloud section")
    names = [m.group for m in cloud.tpu_slice_groups] + [m.group for m in cloud.queued_resources]
    names += [m.node_pool for m in cloud.node_pools]
    for name, count in Counter(names).items():
        if count > 1:
            yield ConfigProblem("cloud", f"name {name!r} is used by {count} mappings; names must be unique")
    yield from _slice_name_problems(cloud)


def _slice_name_problems(cloud: CloudSettings) -> Iterator[ConfigProblem]:
    """A slice group owns every GKE node pool named ``<group>-<n>`` (``actuators.unit_groups.members``): it counts
    each as a slice, deletes one in error and drains an idle one. A node pool of ``node_pools`` named so would be
    resized by its own actuator and deleted or drained by the slice group's."""
    for i, mapping in enumerate(cloud.node_pools):
        for j, group in enumerate(cloud.tpu_slice_groups):
            if re.fullmatch(rf"{re.escape(group.group)}-\d+", mapping.node_pool):
                yield ConfigProblem(
                    f"cloud.node_pools[{i}].node_pool",
                    f"GKE node pool {mapping.node_pool!r} is named like a slice of TPU slice group {group.group!r} "
                    f"(cloud.tpu_slice_groups[{j}].group), which claims every node pool named '{group.group}-<n>': "
                    "its slice actuator would count this node pool as a slice, delete it when it is in error and "
                    "drain it when idle; rename the node pool or the group",
                )


def _spot_problems(
    at: str, mapping: TpuSliceGroupMapping | QueuedResourceMapping, pool: PoolSettings, pool_at: str
) -> Iterator[ConfigProblem]:
    """What the mapping buys (``spot``) must be what the pool is priced, budgeted and planned as (its tier): a spot
    pool bought on-demand costs several times what its budget counts, an on-demand pool bought as Spot is preempted
    with no interruption reserve planned for it."""
    tier = pool.capacity_tier
    if mapping.spot == (tier is CapacityTier.SPOT):
        return
    given = f"{pool_at}.tier" if pool.tier is not None else f"{pool_at}.tier unset, so {tier}"
    if mapping.spot:
        yield ConfigProblem(
            f"{at}.spot",
            f"true buys Spot capacity but pool {pool.id!r} is tier {tier} ({given}): it would be priced and "
            f"budgeted as {tier} capacity and planned without an interruption reserve; set {pool_at}.tier to spot "
            f"with its Spot price, or {at}.spot to false",
        )
    else:
        yield ConfigProblem(
            f"{at}.spot",
            f"false buys standard (not Spot) capacity but pool {pool.id!r} is tier spot ({given}): it would be "
            f"priced and budgeted at its Spot price while paying the standard one; set {at}.spot to true, or "
            f"{pool_at}.tier and its price to what is bought",
        )


def _queued_problems(at: str, mapping: QueuedResourceMapping, pool: PoolSettings) -> Iterator[ConfigProblem]:
    if mapping.chips != pool.chips_per_unit:
        yield ConfigProblem(
            f"{at}.chips", f"{mapping.chips} chips but pool {pool.id!r} has chips_per_unit {pool.chips_per_unit}"
        )
    try:
        bought = accelerator_type_chips(mapping.accelerator_type)
    except ValueError as error:
        yield ConfigProblem(f"{at}.accelerator_type", f"not a TPU accelerator type: {error}")
        return
    if bought is not None and bought != mapping.chips:
        yield ConfigProblem(
            f"{at}.accelerator_type",
            f"{mapping.accelerator_type} is {bought} chips but {at}.chips is {mapping.chips}: each queued resource "
            f"would buy {bought} chips while the pool counts, prices and budgets {mapping.chips}; the number in "
            "v2, v3, v4 and v5p types counts TensorCores (2 per chip: v5p-128 is 64 chips), in v5litepod and v6e "
            "types chips",
        )


def _slice_problems(at: str, mapping: TpuSliceGroupMapping, pool: PoolSettings) -> Iterator[ConfigProblem]:
    if mapping.chips_per_slice != pool.chips_per_unit:
        yield ConfigProblem(
            f"{at}.tpu_topology",
            f"topology {mapping.tpu_topology} has {mapping.chips_per_slice} chips but pool {pool.id!r} has "
            f"chips_per_unit {pool.chips_per_unit}",
        )
    if mapping.chips_per_slice % mapping.chips_per_host:
        yield ConfigProblem(
            f"{at}.chips_per_host",
            f"{mapping.chips_per_slice} chips do not split into hosts of {mapping.chips_per_host}",
        )
    if not re.fullmatch(r"[a-z0-9]+-[a-z0-9-]+", mapping.machine_type):
        yield ConfigProblem(f"{at}.machine_type", f"not a machine type: {mapping.machine_type!r}")
    per_vm = machine_type_chips(mapping.machine_type)
    if per_vm is not None and mapping.chips_per_host != per_vm:
        yield ConfigProblem(
            f"{at}.chips_per_host",
            f"{mapping.chips_per_host} but machine type {mapping.machine_type} has {per_vm} chips per host (its "
            f"-{per_vm}t suffix): the slices would be created with the wrong number of hosts; leave chips_per_host "
            "unset to take it from the machine type",
        )
