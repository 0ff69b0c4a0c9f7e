"""GKE's autoscaler bounds of a node pool the agent sizes: whether the pool may be touched at all with autoscaling on
(``refuse_autoscaling``), the bounds the agent sets for a size (``bounds_at``) and moving them with the pool
(``GkeAutoscalerBounds``).

A pool with GKE autoscaling on is touched only when its mapping says ``move-bounds``; the agent then sets the
autoscaler's total bounds to its target, and they follow the pool down once a drain's nodes are deleted. GKE refuses
a change of the bounds while an operation runs on the pool (``check_bounds_can_move``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from actuators.node_pool_zones import Observed
from actuators.vendor_errors import call_google
from actuators.write_window import write_timeout
from config.cloud import NodePoolMapping
from models import ActuatorError, PermanentActuatorError, TransientActuatorError

log = logging.getLogger("actuators.gke_node_pool")  # the node pool actuator's logger: its bounds log as they did


def bounds_at(nodes: int) -> tuple[int, int]:
    """GKE's autoscaler's total bounds for a pool the agent holds at ``nodes``: ``nodes``-``nodes``, but 0-1 at zero
    nodes. GKE refuses autoscaling on with a maximum of 0 (HTTP 400 "Node_pool_autoscaling.max_node_count and
    node_pool_autoscaling.total_max_node_count cannot be both set to zero."; proto3 JSON leaves the zeros out of the
    body), and a maximum of 1 adds nothing by itself: GKE's autoscaler adds nodes only for pods that cannot be
    scheduled, never to reach its bounds (cluster-autoscaler FAQ, as in ``actuators.gke_node_pool``'s docstring). At
    most one node for such a pod is what the pool can then gain without the agent."""
    return nodes, max(nodes, 1)


def refuse_autoscaling(pool_id: str, mapping: NodePoolMapping, autoscaling: bool) -> None:
    """A pool with GKE autoscaling on is not touched unless its mapping says ``move-bounds``."""
    if autoscaling and mapping.gke_autoscaling == "refuse":
        raise PermanentActuatorError(
            pool_id,
            f"GKE autoscaling is on for node pool {mapping.node_pool!r}; turn it off, or set "
            "gke_autoscaling: move-bounds in its cloud mapping to let the agent move its bounds",
        )


def check_bounds_can_move(pool_id: str, seen: Observed, nodes: int) -> None:
    """GKE refuses a change of the bounds while an operation runs on the pool: nothing is changed until it ends,
    so the bounds can follow the change (retried with the same key)."""
    if seen.autoscaling and seen.bounds != bounds_at(nodes) and seen.operation is not None:
        raise TransientActuatorError(
            pool_id,
            f"operation {seen.operation} is still running on this pool; GKE's autoscaler bounds "
            f"{seen.bounds[0]}-{seen.bounds[1]} must follow the pool to {nodes} nodes, so nothing is changed until "
            "it ends",
        )


class GkeAutoscalerBounds:
    """``gke`` is a ``container_v1.ClusterManagerClient``; ``pool_path`` gives a pool's node pool path."""

    def __init__(self, gke: Any, pool_path: Callable[[str], str]) -> None:
        self._gke = gke
        self._pool_path = pool_path

    def follow(self, pool_id: str, seen: Observed, nodes: int, sent: str = "") -> str:
        """Under ``move-bounds``, GKE's autoscaler bounds moved to the ``nodes`` the pool holds, e.g. once a drain's
        nodes are deleted: left above the pool, they keep GKE's autoscaler from taking it below their minimum and let
        it grow the pool back for any pod that cannot be scheduled. What was moved, "" when nothing was.

        ``sent``: what already went out to the pool's instance groups, in words ("its nodes are being deleted": this
        call or an earlier one with the same key; "its instance groups were resized to 6 nodes"), "" when nothing did.
        A failure is then transient whatever GKE said, with a warning: the change went out, a drain must not be given
        up (which would uncordon a node on its way out) nor the pool blocked; the same key, or the next resize to the
        pool's size, moves the bounds. Without ``sent`` the bounds' write is the change's only one, and the error says
        whether it may have reached GKE (``TransientActuatorError.maybe_applied``) as the write's own error did."""
        if not seen.autoscaling or seen.bounds == bounds_at(nodes):
            return ""
        low, high = seen.bounds
        new_low, new_high = bounds_at(nodes)
        try:
            op = self.set(pool_id, nodes)
        except ActuatorError as exc:
            why = (
                f"GKE's autoscaler bounds are still {low}-{high}, not moved to the pool's {nodes} nodes "
                f"({new_low}-{new_high}) ({exc.reason}); they are moved on the next try"
            )
            # Whether the bounds' own write may have reached GKE (a timeout, a server error) is kept: a release that
            # only moves the bounds is refused only when GKE refused that write.
            maybe = bool(sent) or (isinstance(exc, TransientActuatorError) and exc.maybe_applied)
            if sent:
                log.warning("pool %s: %s, but %s", pool_id, sent, why)
                raise TransientActuatorError(pool_id, why, maybe_applied=maybe) from exc
            if isinstance(exc, PermanentActuatorError):
                raise PermanentActuatorError(pool_id, why) from exc
            raise TransientActuatorError(pool_id, why, maybe_applied=maybe) from exc
        return f"autoscaler bounds {low}-{high} -> {new_low}-{new_high} (operation {op.name})"

    def set(self, pool_id: str, nodes: int) -> Any:
        """GKE's autoscaler's total bounds set for ``nodes`` (``bounds_at``); the operation GKE started."""
        low, high = bounds_at(nodes)
        bounds = {"enabled": True, "total_min_node_count": low, "total_max_node_count": high}
        request: dict[str, Any] = {"name": self._pool_path(pool_id), "autoscaling": bounds}
        return call_google(
            pool_id, self._gke.set_node_pool_autoscaling, request=request, timeout=write_timeout(pool_id), retry=None
        )
