"""CloudTpuQueuedResourceActuator: TPU VMs outside GKE, as groups of Cloud TPU v2 queued resources.

Queued resource ``n`` of group ``g`` is ``g-n`` in the mapping's zone, one accelerator type, spot or guaranteed.
The list of queued resources is the state: ACTIVE ones are ready; creating, accepted, waiting for resources and
provisioning ones are in flight (paid for in the plan, not ready); FAILED and SUSPENDED ones are reported as
failed, deleted on the next resize, and a stockout among them refuses a scale-up with CapacityUnavailable.
Creates carry a ``requestId`` derived from the idempotency key (the API answers a repeat with the first
operation) and deterministic names (a repeat after a restart meets 409 ALREADY_EXISTS): never a second unit.
Long-running operations are started and not waited for.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from actuators.idempotency import KeyedResults
from actuators.pool_reads import PoolReads
from actuators.unit_groups import Unit, UnitPhase, group_state, members, resize_group
from actuators.vendor_errors import GOOGLE_ERRORS, from_google, is_already_exists, is_not_found
from config.cloud import QueuedResourceMapping
from models import ActionResult, ActionStatus, ActuatorError, PermanentActuatorError, PoolState
from models.clock import Clock

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
_REQUEST_IDS = uuid.UUID("6f1c1d9e-6a43-4c55-9d64-6c1f5a0f0b7e")


class CloudTpuQueuedResourceActuator:
    """``tpu`` is a ``tpu_v2.TpuClient``; ``project`` the Google Cloud project of the queued resources."""

    def __init__(self, tpu: Any, project: str, mappings: Sequence[QueuedResourceMapping], clock: Clock) -> None:
        self._tpu = tpu
        self._project = project
        self._mappings = {m.pool: m for m in mappings}
        self._clock = clock
        self._results = KeyedResults()
        self._reads = PoolReads()

    def list_pools(self) -> Sequence[PoolState]:
        """Each group read with its own list: a group whose list fails is left out (``unread_pools``)."""
        now = self._clock.now()
        return self._reads.each(
            self._mappings, lambda pool_id: group_state(pool_id, now, self._units(pool_id, self._mappings[pool_id]))
        )

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
    def _parent(self, mapping: QueuedResourceMapping) -> str:
        return f"projects/{self._project}/locations/{mapping.zone}"

    def _units(self, pool_id: str, mapping: QueuedResourceMapping) -> list[Unit]:
        try:
            listed = list(self._tpu.list_queued_resources(request={"parent": self._parent(mapping)}))
        except GOOGLE_ERRORS as exc:
            raise from_google(pool_id, exc) from exc
        return members(mapping.group, (_describe(qr) for qr in listed))

    def _create(self, pool_id: str, mapping: QueuedResourceMapping, name: str, key: str) -> None:
        parent = self._parent(mapping)
        node = {"accelerator_type": mapping.accelerator_type, "runtime_version": mapping.runtime_version}
        queued: dict[str, Any] = {"tpu": {"node_spec": [{"parent": parent, "node_id": name, "node": node}]}}
        queued["spot" if mapping.spot else "guaranteed"] = {}
        request = {
            "parent": parent,
            "queued_resource_id": name,
            "queued_resource": queued,
            "request_id": str(uuid.uuid5(_REQUEST_IDS, f"{key}/{name}")),
        }
        try:
            self._tpu.create_queued_resource(request=request)
        except GOOGLE_ERRORS as exc:
            if is_already_exists(exc):
                log.info("pool %s: queued resource %s already exists; not creating it again", pool_id, name)
                return
            raise from_google(pool_id, exc) from exc

    def _delete(self, pool_id: str, mapping: QueuedResourceMapping, name: str) -> None:
        try:
            self._tpu.delete_queued_resource(
                request={"name": f"{self._parent(mapping)}/queuedResources/{name}", "force": True}
            )
        except GOOGLE_ERRORS as exc:
            if not is_not_found(exc):
                raise from_google(pool_id, exc) from exc

    def _result(self, key: str, pool_id: str, status: ActionStatus, detail: str) -> ActionResult:
        return ActionResult(key, pool_id, status, self._clock.now(), detail=detail)


def _describe(qr: Any) -> tuple[str, UnitPhase, str]:
    state = qr.state.state.name
    message = qr.state.failed_data.error.message if state == "FAILED" else ""
    return qr.name.rsplit("/", 1)[-1], _PHASES.get(state, UnitPhase.IN_FLIGHT), message
