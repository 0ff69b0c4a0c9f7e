"""CloudTpuQueuedResourceActuator: TPU VMs outside GKE, as groups of Cloud TPU v2 queued resources.

Queued resource ``n`` of group ``g`` is ``g-n`` in the mapping's zone, one accelerator type, spot or guaranteed.
The list of queued resources is the state: ACTIVE ones are ready; creating, accepted, waiting for resources and
provisioning ones are in flight (counted in the target, not ready). Those not given resources yet (creating,
accepted, waiting) are also ``waiting_units``: Cloud TPU charges accrue while the TPU is READY (Cloud TPU pricing),
so the ledger does not charge them; provisioning ones are charged, a few minutes early, as a node pool's
provisioning nodes are. FAILED and SUSPENDED ones are reported as failed, deleted on the next resize, and a
stockout among them refuses a scale-up with CapacityUnavailable.
Creates carry a ``requestId`` derived from the idempotency key (the API answers a repeat with the first
operation) and deterministic names (a repeat after a restart meets 409 ALREADY_EXISTS): never a second unit.
Long-running operations are started and not waited for.

A zone out of capacity does not fail a queued resource: the service keeps it WAITING_FOR_RESOURCES until its
valid-until time passes (its ``queueingPolicy``), and for ever without one. So each request is created with its
pool's wait (``queued_resource_waits``) as its ``validUntilDuration``, and one still waiting for resources once
that has passed since its ``createTime`` (or its own valid-until time: a request made before, with another wait) is
reported failed for want of capacity; so is one FAILED after that time, whatever its error says (the service fails
an expired request), and a SUSPENDING or SUSPENDED one, whose TPU the service took back (a Spot preemption, a
maintenance event). Each refuses a scale-up with CapacityUnavailable, which backs the pool off and sends its demand
to the next eligible pool, and is deleted by the next resize. One whose ``stateInitiator`` is USER (someone of the
project suspended it, not the service) is failed too, but told as that, not as a want of capacity.

Whatever its error says, a FAILED queued resource backs its pool off when the agent removes it: the service fails a
request for "some late-discovered problem with the request itself, or ... unavailability of resources within the
constraints of the request" (tpu_v2 ``QueuedResourceState.State.FAILED``), and the same request asked for again at
once meets either again, where the error's message may be empty or name neither. So every failed unit counts as one
for want of capacity (``PoolState.failed_for_capacity``), and its message is passed on for the operator
(``PoolState.failed_messages``): the error the service gives (``state.failedData.error``, a ``google.rpc.Status``),
or, where it has no message, its code; a message naming a quota used up is read as one (``failed_for_quota``), so
the stockout alert quotes it and says to have the quota raised. Each one's error is also logged once, as a warning.

A TPU being repaired is never reported recreating (``PoolState.recreating_units`` stays 0): a queued resource has no
state for a repair, which shows on its node only (tpu_v2 ``Node.State.REPAIRING``), not in ``queuedResources.list``;
an ACTIVE one is counted ready, so a repair is never in flight nor waited for as a scale-up (docs/google-cloud.md).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from google.rpc import code_pb2

from actuators.idempotency import KeyedResults
from actuators.pool_reads import PoolReads
from actuators.unit_groups import Unit, UnitPhase, group_state, members, resize_group
from actuators.vendor_errors import GOOGLE_ERRORS, from_google, is_already_exists, is_not_found
from actuators.write_window import write_timeout
from config.cloud import QueuedResourceMapping
from config.schema import Settings
from models import ActionResult, ActionStatus, ActuatorError, PermanentActuatorError, PoolState
from models.clock import Clock
from models.durations import format_duration

log = logging.getLogger(__name__)
_PHASES = {
    "ACTIVE": UnitPhase.READY,
    "CREATING": UnitPhase.IN_FLIGHT,
    "ACCEPTED": UnitPhase.IN_FLIGHT,
    "WAITING_FOR_RESOURCES": UnitPhase.IN_FLIGHT,
    "PROVISIONING": UnitPhase.IN_FLIGHT,
    "FAILED": UnitPhase.FAILED,
    "SUSPENDING": UnitPhase.FAILED,
    "SUSPENDED": UnitPhase.FAILED,
    "DELETING": UnitPhase.LEAVING,
}
_WAITING = frozenset({"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES"})  # not given resources yet
_REQUEST_IDS = uuid.UUID("6f1c1d9e-6a43-4c55-9d64-6c1f5a0f0b7e")
DEFAULT_WAIT = timedelta(hours=1)  # for an actuator built without waits (the daemon always passes them)


def queued_resource_waits(settings: Settings) -> dict[str, timedelta]:
    """How long a queued resource of each pool may wait for resources: its pool's lead time times
    ``alerts.stalled_after_lead_times``.

    The planner asked for the unit counting on it within one lead time; a scale-up still short after that many lead
    times is what the stalled-scale-up alert already calls stuck, and a zone that has not filled the request by then
    is, for this pool, out of capacity. Giving up there backs the pool off and sends its demand to the next eligible
    pool, where waiting on would hold the demand for as long as the zone stays out."""
    if settings.cloud is None:
        return {}
    lead = {p.pool_id: p.lead_time for p in settings.pool_specs()}
    factor = settings.alerts.stalled_after_lead_times
    return {m.pool: lead[m.pool] * factor for m in settings.cloud.queued_resources if m.pool in lead}


class CloudTpuQueuedResourceActuator:
    """``tpu`` is a ``tpu_v2.TpuClient``; ``project`` the Google Cloud project of the queued resources; ``waits``
    how long a queued resource of each pool may wait for resources (``queued_resource_waits``; ``DEFAULT_WAIT``
    for a pool it leaves out)."""

    def __init__(
        self,
        tpu: Any,
        project: str,
        mappings: Sequence[QueuedResourceMapping],
        clock: Clock,
        waits: Mapping[str, timedelta] | None = None,
    ) -> None:
        self._tpu = tpu
        self._project = project
        self._mappings = {m.pool: m for m in mappings}
        self._waits = {m.pool: (waits or {}).get(m.pool, DEFAULT_WAIT) for m in mappings}
        self._clock = clock
        self._results = KeyedResults()
        self._reads = PoolReads()
        self._logged: set[tuple[str, str]] = set()  # (queued resource, its failure) logged once each

    def list_pools(self) -> Sequence[PoolState]:
        """Each group read with its own list: a group whose list fails is left out (``unread_pools``)."""
        now = self._clock.now()
        return self._reads.each(self._mappings, lambda pool_id: self._state(pool_id, now))

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return self._reads.unread

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        if (known := self._results.get(key)) is not None:
            return known
        mapping = self._mappings.get(pool_id)
        if mapping is None:
            raise PermanentActuatorError(pool_id, "no Cloud TPU queued resource group is mapped to this pool")
        _, change = resize_group(
            pool_id,
            mapping.group,
            self._units(pool_id, mapping),
            to_units,
            create=lambda name: self._create(pool_id, mapping, name, key),
            delete=lambda name: self._delete(pool_id, mapping, name),
            unit_of_group="a queued resource of",
        )
        if change.is_empty:
            return self._results.remember(self._result(key, pool_id, ActionStatus.DONE, "already at target"))
        detail = f"target {to_units} queued resources: {change.describe()}"
        log.info("pool %s: %s (key %s)", pool_id, detail, key)
        return self._results.remember(self._result(key, pool_id, ActionStatus.STARTED, detail))

    # -- internals -----------------------------------------------------------------------------------------
    def _state(self, pool_id: str, now: datetime) -> PoolState:
        listed = self._list(pool_id, self._mappings[pool_id])
        units = self._members(pool_id, self._mappings[pool_id], listed)
        waiting = {qr.name.rsplit("/", 1)[-1] for qr in listed if qr.state.state.name in _WAITING}
        in_flight = sum(1 for u in units if u.phase is UnitPhase.IN_FLIGHT and u.name in waiting)
        for unit in (u for u in units if u.phase is UnitPhase.FAILED and (u.name, u.message) not in self._logged):
            self._logged.add((unit.name, unit.message))
            log.warning(
                "pool %s: queued resource %s failed, counted as a stockout (removed, the pool backed off): %s",
                pool_id, unit.name, unit.message,
            )  # fmt: skip
        state = group_state(pool_id, now, units)
        # A failed request, asked for again at once, fails again whatever its error says (the module's docstring).
        return replace(state, waiting_units=in_flight, failed_for_capacity=state.failed_units > 0)

    def _parent(self, mapping: QueuedResourceMapping) -> str:
        return f"projects/{self._project}/locations/{mapping.zone}"

    def _units(self, pool_id: str, mapping: QueuedResourceMapping) -> list[Unit]:
        return self._members(pool_id, mapping, self._list(pool_id, mapping))

    def _list(self, pool_id: str, mapping: QueuedResourceMapping) -> list[Any]:
        try:
            return list(self._tpu.list_queued_resources(request={"parent": self._parent(mapping)}))
        except GOOGLE_ERRORS as exc:
            raise from_google(pool_id, exc) from exc

    def _members(self, pool_id: str, mapping: QueuedResourceMapping, listed: Sequence[Any]) -> list[Unit]:
        now, wait = self._clock.now(), self._waits[pool_id]
        return members(mapping.group, (_seen(qr, now, wait) for qr in listed))

    def _create(self, pool_id: str, mapping: QueuedResourceMapping, name: str, key: str) -> None:
        parent = self._parent(mapping)
        node = {"accelerator_type": mapping.accelerator_type, "runtime_version": mapping.runtime_version}
        queued: dict[str, Any] = {"tpu": {"node_spec": [{"parent": parent, "node_id": name, "node": node}]}}
        queued["spot" if mapping.spot else "guaranteed"] = {}
        # The service fails a request it has not filled by then (FAILED), where it would keep it waiting for ever.
        queued["queueing_policy"] = {"valid_until_duration": self._waits[pool_id]}
        request = {
            "parent": parent,
            "queued_resource_id": name,
            "queued_resource": queued,
            "request_id": str(uuid.uuid5(_REQUEST_IDS, f"{key}/{name}")),
        }
        try:
            self._tpu.create_queued_resource(request=request, timeout=write_timeout(pool_id), retry=None)
        except GOOGLE_ERRORS as exc:
            if is_already_exists(exc):
                log.info("pool %s: queued resource %s already exists; not creating it again", pool_id, name)
                return
            raise from_google(pool_id, exc) from exc

    def _delete(self, pool_id: str, mapping: QueuedResourceMapping, name: str) -> None:
        try:
            self._tpu.delete_queued_resource(
                request={"name": f"{self._parent(mapping)}/queuedResources/{name}", "force": True},
                timeout=write_timeout(pool_id),
                retry=None,
            )
        except GOOGLE_ERRORS as exc:
            if not is_not_found(exc):
                raise from_google(pool_id, exc) from exc

    def _result(self, key: str, pool_id: str, status: ActionStatus, detail: str) -> ActionResult:
        return ActionResult(key, pool_id, status, self._clock.now(), detail=detail)


def _seen(qr: Any, now: datetime, wait: timedelta) -> tuple[str, UnitPhase, str]:
    """(name, phase, message) of a listed queued resource, read at ``now``. The message of one that failed for want
    of capacity starts "insufficient capacity", which ``resize_group`` reads as a stockout, as it reads the
    service's own stockout errors."""
    name, state = qr.name.rsplit("/", 1)[-1], qr.state.state.name
    until = _valid_until(qr, wait)
    expired = until is not None and now >= until
    if state in _WAITING and expired:
        waited = format_duration(now - qr.create_time)
        return name, UnitPhase.FAILED, f"insufficient capacity: still waiting for resources after {waited}"
    if state == "FAILED":
        message = _error(qr.state.failed_data.error)
        return (
            name,
            UnitPhase.FAILED,
            f"insufficient capacity: expired waiting for resources ({message})" if expired else message,
        )
    if state in ("SUSPENDING", "SUSPENDED"):
        if qr.state.state_initiator.name == "USER":  # not the service: nothing says it lacked capacity
            return (
                name,
                UnitPhase.FAILED,
                f"{state.lower()} at a user's request (the service names a user, not itself, as its initiator)",
            )
        reason = "a Spot preemption or a maintenance event"
        return name, UnitPhase.FAILED, f"{state.lower()}: insufficient capacity to keep its TPU ({reason})"
    return name, _PHASES.get(state, UnitPhase.IN_FLIGHT), ""


def _error(status: Any) -> str:
    """The message of a FAILED request's ``google.rpc.Status``; one it leaves empty (a plain proto3 string) is told by
    the status's code, as the service gave nothing else."""
    if status.message:
        return str(status.message)
    try:
        code = code_pb2.Code.Name(status.code)
    except ValueError:
        code = str(status.code)
    return f"the service failed the request with code {code} and no message"


def _valid_until(qr: Any, wait: timedelta) -> datetime | None:
    """Until when the request may wait for resources: its own valid-until time if its ``queueingPolicy`` sets one,
    else ``wait`` from its creation (None when the service gave no creation time)."""
    policy = qr.queueing_policy
    if "valid_until_time" in policy:
        until: datetime = policy.valid_until_time
        return until
    created: datetime | None = qr.create_time
    if created is None:
        return None
    return created + (policy.valid_until_duration if "valid_until_duration" in policy else wait)
