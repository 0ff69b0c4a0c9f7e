"""Cross-checks of the cloud section against the pools section, one problem per key: each mapping names a known
pool of a kind it can buy, each pool is mapped once, names are unique, and what a mapping buys (chips, hosts, Spot)
is what its pool is counted, priced and budgeted as. Called by ``config.rules``."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from config.cloud import (
    ZONE,
    CloudSettings,
    NodePoolMapping,
    QueuedResourceMapping,
    TpuSliceGroupMapping,
    accelerator_type_chips,
    machine_type_chips,
    machine_type_generation,
)
from config.schema import PoolSettings
from models import CapacityTier, ConfigProblem, PoolKind

_KINDS = {
    "node_pools": (PoolKind.GPU_NODE_POOL,),
    "tpu_slice_groups": (PoolKind.TPU_SLICE_GROUP,),
    "queued_resources": (PoolKind.TPU_QUEUED_RESOURCE,),
}


def check_cloud(
    cloud: CloudSettings | None, pools: Sequence[PoolSettings], elsewhere: Mapping[str, str] | None = None
) -> list[ConfigProblem]:
    """``elsewhere``: pools mapped to another cloud's resources, each with the key that maps it (``aws.nodegroups``,
    ``aws.auto_scaling_groups``); not expected here. A pool mapped there and here would be resized through one cloud
    and drained and read through the other: it is refused."""
    return [] if cloud is None else list(_problems(cloud, pools, elsewhere or {}))


def _problems(
    cloud: CloudSettings, pools: Sequence[PoolSettings], elsewhere: Mapping[str, str]
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
            if pool.id in elsewhere:
                yield ConfigProblem(
                    f"{at}.pool", f"pool {pool.id!r} is already mapped in {elsewhere[pool.id]}; map each pool once"
                )
            if pool.kind not in kinds:
                yield ConfigProblem(
                    f"{at}.pool", f"pool {pool.id!r} is of kind {pool.kind}; cloud.{section} maps {kinds[0]} pools"
                )
            if isinstance(mapping, TpuSliceGroupMapping | QueuedResourceMapping):
                yield from _spot_problems(at, mapping, pool, f"pools[{index[pool.id]}]")
            if isinstance(mapping, TpuSliceGroupMapping):
                yield from _slice_problems(at, mapping, pool)
                if mapping.zone is None and not ZONE.fullmatch(cloud.location):
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
    else:
        yield from _topology_shape_problems(at, mapping)
    per_vm = machine_type_chips(mapping.machine_type)
    if per_vm is not None and mapping.chips_per_host != per_vm:
        yield ConfigProblem(
            f"{at}.chips_per_host",
            f"{mapping.chips_per_host} but machine type {mapping.machine_type} has {per_vm} chips per host (its "
            f"-{per_vm}t suffix): the slices would be created with the wrong number of hosts; leave chips_per_host "
            "unset to take it from the machine type",
        )


def _topology_shape_problems(at: str, mapping: TpuSliceGroupMapping) -> Iterator[ConfigProblem]:
    """A topology GKE does not offer for the machine type (``config.cloud``, its sources beside each generation): GKE
    refuses it at the first slice create, an actuator failure hours after the file loaded. Checked in turn: the
    number of dimensions of the generation (``2x2x4`` on v5e, ``4x4`` on v5p), a multi-host slice of a generation
    placed by a workload policy (Ironwood), its dimensions rule (v4), the shapes it offers (v5e, v6e), and those
    offered on the machine type (a single-host-only one takes its one shape). A generation not known here is not
    checked (one GKE adds later loads)."""
    generation = machine_type_generation(mapping.machine_type)
    if generation is None:
        return
    topology, machine_type = mapping.tpu_topology, mapping.machine_type
    sizes = [int(d) for d in topology.split("x")]
    if len(sizes) != generation.dimensions:
        shape = "AxB" if generation.dimensions == 2 else "AxBxC"
        example = f", e.g. {generation.example}" if generation.example else ""
        yield ConfigProblem(
            f"{at}.tpu_topology",
            f"{topology} is a {len(sizes)}-D topology but machine type {machine_type} is {generation.name}, which "
            f"GKE slices in {generation.dimensions}-D topologies only ({shape}{example}): GKE would refuse the first "
            "slice the agent creates",
        )
        return
    per_host = machine_type_chips(machine_type) or mapping.chips_per_host
    if generation.multi_host_by_workload_policy and mapping.chips_per_slice > per_host:
        single = f"{generation.example}, " if generation.example else ""
        yield ConfigProblem(
            f"{at}.tpu_topology",
            f"{topology} ({mapping.chips_per_slice} chips) is a multi-host slice of machine type {machine_type} "
            f"({per_host} chips per host): GKE creates a multi-host {generation.name} slice with a workload policy, "
            "which replaces the TPU topology other generations are created with, and the agent creates its slices "
            "with a topology and no workload policy, so it cannot create these; use single-host slices "
            f"({single}one host of {per_host} chips) for this group, or a machine type of another TPU generation "
            "for multi-host slices",
        )
        return
    if generation.small_or_multiples_of_4 and not (
        all(size <= 4 for size in sizes) or all(size % 4 == 0 for size in sizes)
    ):
        yield ConfigProblem(
            f"{at}.tpu_topology",
            f"{topology} is not a {generation.name} topology (machine type {machine_type}): a {generation.name} "
            "topology's dimensions must all be at most 4 or all be multiples of 4 (2x2x1, 2x2x4, 4x4x8, 8x8x16): "
            "GKE would refuse the first slice the agent creates",
        )
        return
    if not generation.shapes:
        return
    offered = generation.shapes_for(machine_type_chips(machine_type))
    if topology in offered:
        return
    takes = ", ".join(offered) if offered else f"none of {generation.name}'s ({', '.join(generation.shapes)})"
    if topology not in generation.shapes:
        yield ConfigProblem(
            f"{at}.tpu_topology",
            f"{topology} is not a slice shape GKE offers on machine type {machine_type} ({generation.name}), which "
            f"takes {takes}: GKE would refuse the first slice the agent creates",
        )
    elif mapping.chips_per_slice % mapping.chips_per_host == 0:  # an uneven split is the chips_per_host problem
        others = [
            other
            for other in generation.machine_types
            if other != machine_type and topology in generation.shapes_for(machine_type_chips(other))
        ]
        on = " and ".join(others) if others else f"another {generation.name} machine type"
        yield ConfigProblem(
            f"{at}.tpu_topology",
            f"{topology} is not a slice shape GKE offers on machine type {machine_type}, which takes {takes}; "
            f"{generation.name} slices of {topology} are offered on {on}: GKE would refuse the first slice the agent "
            "creates",
        )
