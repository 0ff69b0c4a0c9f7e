"""The writes of a GKE TPU slice group (``SliceWrites``): a slice's node pool created whole or deleted whole, and the
GKE operation each starts looked at once, never waited for (the agent must not block a tick).

A create repeated after a restart meets 409 ALREADY_EXISTS on the same name and is no second slice; a delete of a
node pool already gone (404) is done. Neither is retried by the client: container_v1 retries a call answered 503 or
504 for 20 s, each attempt with the whole time limit again (``actuators.write_window``), so a write could still be
sent after the leadership ran out.
"""

from __future__ import annotations

import logging
from typing import Any

from actuators.vendor_errors import (
    GOOGLE_ERRORS,
    call_google,
    from_google,
    from_operation_error,
    is_already_exists,
    is_not_found,
)
from actuators.write_window import write_raised, write_refused, write_returned, write_timeout
from config.cloud import TpuSliceGroupMapping
from models import ActuatorError, TransientActuatorError

log = logging.getLogger("actuators.gke_tpu_slices")  # the slice actuator's logger: its writes log as they did


class SliceWrites:
    """``gke`` is a ``container_v1.ClusterManagerClient``; ``cluster_path`` ``projects/P/locations/L/clusters/C``."""

    def __init__(self, gke: Any, cluster_path: str) -> None:
        self._gke = gke
        self._cluster = cluster_path
        self._location = cluster_path.rsplit("/clusters/", 1)[0]

    def create(self, pool_id: str, mapping: TpuSliceGroupMapping, name: str) -> None:
        """Slice ``name`` of the group, its node pool created whole with the group's machine type and topology, its
        nodes running as the group's node service account (unset: GKE's default, the project's Compute Engine
        default service account). Naming an account needs ``iam.serviceAccounts.actAs`` on it (docs/google-cloud.md).
        """
        config: dict[str, Any] = {"machine_type": mapping.machine_type, "spot": mapping.spot}
        if mapping.service_account:
            config["service_account"] = mapping.service_account
        if mapping.oauth_scopes:
            config["oauth_scopes"] = list(mapping.oauth_scopes)
        node_pool: dict[str, Any] = {
            "name": name,
            "initial_node_count": mapping.hosts_per_slice,
            "config": config,
            "placement_policy": {"type_": "COMPACT", "tpu_topology": mapping.tpu_topology},
            "autoscaling": {"enabled": False},
        }
        if mapping.zone:
            node_pool["locations"] = [mapping.zone]
        try:
            request = {"parent": self._cluster, "node_pool": node_pool}
            op = self._gke.create_node_pool(request=request, timeout=write_timeout(pool_id), retry=None)
        except GOOGLE_ERRORS as exc:
            write_raised()
            if is_already_exists(exc):
                log.info("pool %s: slice %s already exists; not creating it again", pool_id, name)
                return
            raise from_google(pool_id, exc) from exc
        write_returned()
        self._look_once(pool_id, op)

    def delete(self, pool_id: str, name: str) -> None:
        """Slice ``name``'s node pool deleted whole."""
        try:
            path = f"{self._cluster}/nodePools/{name}"
            # No retry: container_v1 retries a delete answered 503 or 504 for 20 s, each attempt with the whole time
            # limit again (``write_window``), so a DELETE could still be sent after the leadership ran out.
            op = self._gke.delete_node_pool(name=path, timeout=write_timeout(pool_id), retry=None)
        except GOOGLE_ERRORS as exc:
            write_raised()
            if is_not_found(exc):
                return
            raise from_google(pool_id, exc) from exc
        write_returned()
        self._look_once(pool_id, op)

    def _look_once(self, pool_id: str, op: Any) -> None:
        """The operation a write started, looked at once. GKE accepted the write: a look that fails, whatever it met
        (a rate limit, a token not had, 403, 404), says the change may be carried out (``maybe_applied``). An
        operation read done with an error is GKE's answer to the write, which is no longer counted accepted: the
        error says for it (``write_refused``)."""
        try:
            op = call_google(pool_id, self._gke.get_operation, name=f"{self._location}/operations/{op.name}")
        except ActuatorError as exc:
            why = f"operation {op.name} was started, but it could not be read afterwards: {exc.reason}"
            raise TransientActuatorError(pool_id, why, maybe_applied=True) from exc
        if op.status.name == "DONE" and op.error and op.error.message:
            write_refused()
            raise from_operation_error(pool_id, op.error.code, op.error.message)
