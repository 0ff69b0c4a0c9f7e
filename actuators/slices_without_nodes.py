"""Ready TPU slices none of whose hosts is a node of the cluster (``SlicesWithoutNodes``): since when each has been
seen so, and what it counts as.

Such a slice (its hosts left during a drain before a restart, or were removed, or are being recovered: a multi-host
slice is recovered whole) runs nothing and serves nothing, though it is paid for. Read from the cluster's nodes (the
slice drainer's ``slices_without_nodes``), it is in flight (billed, not ready, in the target) for its group's grace
from when it is first seen so (``actuators.gke_tpu_slices.nodes_graces``), then failed, deleted by the next resize
with nothing to drain and no back-off, so the planner asks for a slice in its place when the demand needs one. One
GKE reports RECONCILING (an upgrade recreating its nodes) stays in flight, and its grace starts again once GKE reports
it done, for its hosts to register. A slice the drainer is draining whose nodes left is still ready: its drain
deletes it (the drainer leaves it out of ``slices_without_nodes``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from datetime import datetime, timedelta
from typing import Any

from actuators.unit_groups import UnitPhase
from models.durations import format_duration

Seen = tuple[str, UnitPhase, str]  # (slice, phase, message)


class SlicesWithoutNodes:
    """``graces``: how long a ready slice of each group may have no node in the cluster before it is failed;
    ``default`` for a group it leaves out. ``log_once(slice, what, message)`` warns once of each thing said of a
    slice (the slice actuator's own warnings)."""

    def __init__(
        self, graces: Mapping[str, timedelta], default: timedelta, log_once: Callable[[str, str, str], None]
    ) -> None:
        self._graces = dict(graces)
        self._default = default
        self._log_once = log_once
        self._since: dict[tuple[str, str], datetime] = {}  # (pool, slice) -> first seen ready without nodes

    def counted(
        self, pool_id: str, seen: Sequence[Seen], by_name: Mapping[str, Any], absent: Set[str], now: datetime
    ) -> list[Seen]:
        """The group's slices, a ready one in ``absent`` (no node in the cluster) counted as what it is: in flight
        for its group's grace from when it is first seen so, its grace counting from the last read that found it
        RECONCILING (its hosts register only once GKE is done), then failed. ``by_name``: the node pools, by name."""
        grace = self._graces.get(pool_id, self._default)
        listed = {(pool_id, name) for name, _, _ in seen}
        self._since = {k: t for k, t in self._since.items() if k[0] != pool_id or k in listed}
        out = []
        for name, phase, message in seen:
            if phase is not UnitPhase.READY or name not in absent:
                if phase is UnitPhase.READY:
                    self._since.pop((pool_id, name), None)
                out.append((name, phase, message))
                continue
            status = str(by_name[name].status.name)
            if status == "RECONCILING":  # GKE still works on it: its grace starts once GKE is done
                self._since[(pool_id, name)] = now
            since = self._since.setdefault((pool_id, name), now)
            if now - since < grace or status == "RECONCILING":
                self._log_once(name, "has no node in the cluster: counted as in flight, not ready", f"since {since}")
                out.append((name, UnitPhase.IN_FLIGHT, message))
                continue
            self._log_once(name, "has had no node in the cluster: failed, deleted by the next resize", f"since {since}")
            why = f"{status} with no node in the cluster for {format_duration(now - since)}: it runs and serves nothing"
            out.append((name, UnitPhase.FAILED, why))
        return out
