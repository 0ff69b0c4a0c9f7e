"""What a GKE node pool is made of, zone by zone, as Compute Engine tells it: each zone's managed instance group
(``targetSize``) and its instances, each ready, still being created, failed (for capacity, or for a reason of its own,
confined to its zone or not: ``is_zonal_error``) or leaving. Read by ``GkeNodePoolActuator``; no calls are made here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from actuators.vendor_errors import capacity_failure, is_quota_message, is_rate_limited

# ManagedInstance.currentAction values: created for the first time, or recreated (it had been created: a repair)
_FIRST_CREATION = ("CREATING", "CREATING_WITHOUT_RETRIES")
_NOT_CREATED = (*_FIRST_CREATION, "RECREATING")
_LEAVING = ("DELETING", "ABANDONING")  # leaving the group (cluster-autoscaler reads both so)
_ZONE_NAMED = re.compile(r"zones/([a-z0-9-]+)")
# An error on the last attempt of an instance not running yet (ManagedInstance.instanceStatus) failed its creation,
# whatever its code, as cluster-autoscaler reads it (GCE GetErrorInfo); these codes do whatever the status says. A rate
# limit (Compute's "Rate Limit Exceeded", CONCURRENT_OPERATIONS_QUOTA_EXCEEDED; "Operation rate exceeded for resource
# '...'", RESOURCE_OPERATION_RATE_EXCEEDED) fails nothing: the group retries the create once the operations in flight
# drain, so the instance is still coming (``vendor_errors.is_rate_limited``).
_NOT_RUNNING_YET = ("", "PROVISIONING", "STAGING")
_CREATION_ERRORS = ("IP_SPACE_EXHAUSTED", "PERMISSIONS_ERROR")
# A unit's own error that is not its zone's: a subnetwork out of addresses (IP_SPACE_EXHAUSTED, naming
# 'projects/P/regions/R/subnetworks/S'), a permission, an organization policy ('constraints/...'), or any error naming a
# resource of the region or of the whole project ('/regions/', '/global/': an image, a template): every zone of the pool
# meets it alike. Any other (a zone's reservation used up, not found or not ready) is confined to its zone.
_POOL_WIDE_ERROR = re.compile(
    r"IP_SPACE_EXHAUSTED|PERMISSION|constraints/|/regions/|/global/|subnetwork", re.IGNORECASE
)


def is_zonal_error(error: str) -> bool:
    """Whether a unit's own error (``Instance.error``) is confined to its zone (``_POOL_WIDE_ERROR`` says which are
    not), so that the zone is backed off like a stockout zone: cluster-autoscaler backs off the one-zone group that met
    any creation error, and SkyPilot's GCP provisioner blocks the zone for an error it does not read as wider."""
    return bool(error) and not _POOL_WIDE_ERROR.search(error)


@dataclass(frozen=True)
class Instance:
    name: str
    mig: tuple[str, str, str]  # project, zone, instance group manager
    ready: bool
    failure: str  # why it could not be created (a stockout), "" when nothing says it cannot be
    deleting: bool = False
    first_creation: bool = False  # being created for the first time (CREATING): it has never run
    # why it could not be created for a reason other than capacity (its last attempt's error), "" when none
    error: str = ""
    recreating: bool = False  # being recreated (RECREATING): a repair of an instance that ran, not a scale-up

    @property
    def failed_for(self) -> str:
        """Why it could not be created, capacity or not; "" when nothing says it cannot be."""
        return self.failure or self.error


@dataclass(frozen=True)
class Zone:
    mig: tuple[str, str, str]  # project, zone, instance group manager
    asked: int  # the group's targetSize, failed instances included
    instances: tuple[Instance, ...]

    @property
    def name(self) -> str:
        return self.mig[1]

    @property
    def ready(self) -> int:
        return sum(1 for i in self.instances if i.ready)

    @property
    def failed(self) -> tuple[Instance, ...]:
        return tuple(i for i in self.instances if i.failed_for)

    @property
    def target(self) -> int:
        """Ready and still coming: what was asked for minus what cannot be created."""
        return self.asked - len(self.failed)


@dataclass(frozen=True)
class Observed:
    autoscaling: bool
    zones: tuple[Zone, ...]
    operation: str | None
    # (zone, instance group) of each zone whose instance group the pool lists but Compute does not find (404)
    missing: tuple[tuple[str, str], ...] = ()
    bounds: tuple[int, int] = (0, 0)  # GKE's autoscaler's total min and max node counts (read when it is on)
    # An operation running on the cluster itself (an upgrade GKE started), during which GKE refuses node pool changes
    # (the bounds of a move-bounds pool), not the Compute resizes of the pool's groups
    cluster_operation: str | None = None

    @property
    def asked(self) -> int:
        return sum(z.asked for z in self.zones)

    @property
    def instances(self) -> tuple[Instance, ...]:
        return tuple(i for z in self.zones for i in z.instances)

    @property
    def ready(self) -> int:
        return sum(z.ready for z in self.zones)

    @property
    def failed(self) -> tuple[Instance, ...]:
        return tuple(i for z in self.zones for i in z.failed)

    @property
    def target(self) -> int:
        return sum(z.target for z in self.zones)

    @property
    def recreating(self) -> int:
        """The instances being recreated and still coming (not failed): in ``target``, not ready."""
        return sum(1 for i in self.instances if i.recreating and not i.failed_for)

    @property
    def failed_for_quota(self) -> bool:
        """Whether an instance failed for a quota used up (which no zone of the pool escapes)."""
        return any(is_quota_message(i.failure) for i in self.failed)

    @property
    def failed_reason(self) -> str:
        """The reason to quote for the failed instances: a quota used up first (what the operator must have raised),
        then a stockout, then a reason of an instance's own; "" when none failed."""
        failed = self.failed
        first = next((i.failure for i in failed if is_quota_message(i.failure)), "")
        return first or next((i.failure for i in failed if i.failure), "") or next((i.error for i in failed), "")

    def zonal_errors(self) -> dict[str, str]:
        """Each zone none of whose units failed for capacity and one failed for an error confined to the zone
        (``is_zonal_error``), with that error."""
        found = {z.name: next((i.error for i in z.failed if is_zonal_error(i.error)), "") for z in self.zones}
        capacity = {z.name for z in self.zones if any(i.failure for i in z.failed)}
        return {zone: error for zone, error in found.items() if error and zone not in capacity}

    def without_failed(self) -> Observed:
        """As it is once the failed instances are deleted."""
        kept = tuple(Zone(z.mig, z.target, tuple(i for i in z.instances if not i.failed_for)) for z in self.zones)
        return replace(self, zones=kept)


def instance_from(managed: Any, mig: tuple[str, str, str], pool_failure: str) -> Instance:
    """One managed instance; ``pool_failure`` is the stockout the pool's latest operation ended with (or its node
    pool's message), if any: it applies to the instances being created for the first time in every zone it names
    (GKE's message names each zone that fell short, one sentence each), or in every zone if it names none. An instance
    being recreated (RECREATING: a repair of a host that ran) is short only for what its own last attempt says: GKE
    keeps a node pool's message for days after the creates it tells of succeeded, and it says nothing of a repair.
    An instance not created whose last attempt failed for another reason (a subnet out of addresses, a permission)
    carries that error instead (``Instance.error``): it is retried for ever and never comes by itself."""
    named = _ZONE_NAMED.findall(pool_failure)
    if named and mig[1] not in named:
        pool_failure = ""
    errors = managed.last_attempt.errors.errors if managed.last_attempt and managed.last_attempt.errors else []
    name = managed.instance.rsplit("/", 1)[-1] if managed.instance else managed.name
    action = managed.current_action
    failure = error = ""
    if action in _NOT_CREATED:
        said = [(str(e.code), str(e.message)) for e in errors]
        failure = capacity_failure(said)
        failure = failure or (pool_failure if action in _FIRST_CREATION else "")
        if not failure:
            error = _creation_error(said, str(managed.instance_status))
    first = action in _FIRST_CREATION
    leaving = action in _LEAVING
    recreating = action == "RECREATING"
    return Instance(
        name, mig, action == "NONE", failure, deleting=leaving, first_creation=first, error=error, recreating=recreating
    )


def _creation_error(said: list[tuple[str, str]], status: str) -> str:
    """The last attempt's error that failed an instance's creation, as "code: message"; "" when none did: an error
    on an instance not running yet, or one of ``_CREATION_ERRORS`` whatever its status, and never a rate limit."""
    found = (
        ": ".join(part for part in (code, message) if part)
        for code, message in said
        if not is_rate_limited(code, message)
        and (status in _NOT_RUNNING_YET or any(c in code for c in _CREATION_ERRORS))
    )
    return next((f for f in found if f), "")
