"""Groups of whole units with deterministic names (``<group>-<n>``): TPU slices as GKE node pools, Cloud TPU
queued resources. What both adapters share: which units count (``counted``, ``group_state``), which to create or
delete (``change_for``), and the order a resize carries that out in (``resize_group``); the adapters bring the
calls that list, create and delete one unit.

Names are deterministic so that a create repeated after a restart collides with the first one (409 ALREADY_EXISTS)
instead of making a second unit: the cloud's own list is the journal.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from actuators.vendor_errors import is_capacity_message, is_quota_message
from models import CapacityUnavailable, PoolState, TransientActuatorError


class UnitPhase(StrEnum):
    READY = "ready"  # accepting work
    IN_FLIGHT = "in-flight"  # asked for, not ready yet (queued, provisioning): paid for, counts in the target
    FAILED = "failed"  # failed, suspended, in error: counts nowhere; cleaned up on the next resize
    LEAVING = "leaving"  # being deleted; its name is not reusable yet
    # cannot serve and has work on it (a slice in error, short of hosts, its job's pod on it): counts nowhere, so
    # another unit is asked for in its place, and is never deleted by a resize; a person decides
    BROKEN = "broken"


@dataclass(frozen=True)
class Unit:
    index: int
    name: str
    phase: UnitPhase
    message: str = ""


@dataclass(frozen=True)
class GroupChange:
    create: tuple[str, ...]
    delete: tuple[str, ...]
    deferred: str = ""  # why the creates after the last of ``create`` were not asked for (left to a later resize)

    @property
    def is_empty(self) -> bool:
        return not self.create and not self.delete

    def describe(self) -> str:
        """What was asked for, e.g. "create v5e-2, v5e-3; delete v5e-0", and what was left, if anything."""
        verbs = (("create", self.create), ("delete", self.delete))
        text = "; ".join(f"{verb} {', '.join(names)}" for verb, names in verbs if names)
        return f"{text}; the rest on a later resize ({self.deferred})" if self.deferred else text


# The units whose message says why they are not serving now; a ready or leaving unit's may be stale (``resize_group``).
_TOLD = frozenset({UnitPhase.IN_FLIGHT, UnitPhase.FAILED, UnitPhase.BROKEN})


def unit_name(group: str, index: int) -> str:
    return f"{group}-{index}"


def members(group: str, names: Iterable[tuple[str, UnitPhase, str]]) -> list[Unit]:
    """The units of ``group`` among (name, phase, message) triples, by index; other names are ignored."""
    pattern = re.compile(rf"^{re.escape(group)}-(\d+)$")
    units = []
    for name, phase, message in names:
        found = pattern.match(name)
        if found:
            units.append(Unit(int(found[1]), name, phase, message))
    return sorted(units, key=lambda u: u.index)


def counted(units: Sequence[Unit]) -> tuple[int, int, int]:
    """(ready, target = ready + in flight, failed)."""
    ready = sum(1 for u in units if u.phase is UnitPhase.READY)
    in_flight = sum(1 for u in units if u.phase is UnitPhase.IN_FLIGHT)
    return ready, ready + in_flight, sum(1 for u in units if u.phase is UnitPhase.FAILED)


def group_state(pool_id: str, observed_at: datetime, units: Sequence[Unit]) -> PoolState:
    """The group's counts, with the message of each failed unit when every one has one: an empty message says
    nothing of why its unit failed, so then none is passed on and the agent counts the failed units a stockout. A
    message that names a stockout or an exhausted quota, in Google's words, makes them one too
    (``PoolState.failed_for_capacity``), and one that names an exhausted quota says so (``failed_for_quota``)."""
    ready, target, failed = counted(units)
    messages = tuple(u.message for u in units if u.phase is UnitPhase.FAILED)
    said = messages if all(messages) else ()
    stockout = any(is_capacity_message(m) for m in said)
    quota = any(is_quota_message(m) for m in said)
    return PoolState(
        pool_id,
        observed_at,
        ready,
        target,
        failed_units=failed,
        failed_messages=said,
        failed_for_capacity=stockout,
        failed_for_quota=quota,
    )


def change_for(group: str, units: Sequence[Unit], to_units: int, drained: bool = False) -> GroupChange:
    """Create the lowest free indices, or delete in-flight units first (newest first), then ready ones.

    Failed units are always deleted so their names and quota come back. A ``drained`` group (its units removed only
    by a drainer) deletes nothing else: below its target, only its failed units go.
    """
    _, target, _ = counted(units)
    failed = tuple(u.name for u in units if u.phase is UnitPhase.FAILED)
    if to_units > target:
        taken = {u.index for u in units}
        free = (i for i in range(len(units) + to_units + 1) if i not in taken)
        return GroupChange(tuple(unit_name(group, next(free)) for _ in range(to_units - target)), failed)
    if drained:
        return GroupChange((), failed)
    removable = [u for u in reversed(units) if u.phase is UnitPhase.IN_FLIGHT]
    removable += [u for u in reversed(units) if u.phase is UnitPhase.READY]
    return GroupChange((), failed + tuple(u.name for u in removable[: target - to_units]))


def resize_group(
    pool_id: str,
    group: str,
    units: Sequence[Unit],
    to_units: int,
    create: Callable[[str], None],
    delete: Callable[[str], None],
    unit_of_group: str,
    drained: bool = False,
) -> tuple[int, GroupChange]:
    """Carry out ``change_for``: delete first (failed units always), then refuse a scale-up with CapacityUnavailable
    if a unit not ready failed for capacity (the provider has none now: a failed unit, one still in flight whose
    creation met a stockout, or a broken one whose missing hosts did), else create. A ready or leaving unit's message
    is not read so, as it may outlive what it tells: GKE keeps a slice's "Not all instances running in IGM ...
    ZONE_RESOURCE_POOL_EXHAUSTED" message for days after its hosts were created, and still while it is deleted.
    Returns the target before and the change carried out (empty when already at target). ``unit_of_group`` names a
    unit for the error ("a slice of group"). ``drained``: see ``change_for``; a ``to_units`` below the target
    returned then was not carried out beyond the failed units' deletion, for the caller to say so.

    Each unit is its own call, and the provider may refuse one of them for a while (a rate limit, a cluster's quota
    of concurrent operations: a transient error) after others went through. Those stay asked for: the change
    returned is what was done, with the refusal in ``deferred``, and a later resize asks for the rest. A transient
    refusal before anything changed is raised, as any error is."""
    _, target, _ = counted(units)
    change = change_for(group, units, to_units, drained)
    stockouts = [u.message for u in units if u.phase in _TOLD and is_capacity_message(u.message)]
    for name in change.delete:
        delete(name)
    if to_units > target and stockouts:
        quotas = [m for m in stockouts if is_quota_message(m)]  # the quota to raise is named where one is told
        told = quotas[0] if quotas else stockouts[0]
        more = f" (and {len(stockouts) - 1} more)" if len(stockouts) > 1 else ""
        raise CapacityUnavailable(pool_id, f"{unit_of_group} {group!r} failed: {told}{more}", quota=bool(quotas))
    created: list[str] = []
    for name in change.create:
        try:
            create(name)
        except TransientActuatorError as exc:
            if not created and not change.delete:
                raise
            return target, GroupChange(tuple(created), change.delete, deferred=str(exc))
        created.append(name)
    return target, change
