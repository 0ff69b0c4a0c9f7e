"""RoutingActuator: several actuators presented as one, each pool routed to the actuator that owns it.

Each actuator's pools are read apart from the others': an actuator that fails its whole read (an API that cannot be
reached) has its pools left out and reported in ``unread_pools``, as are the pools an actuator reports unread
itself, so one cloud that cannot be read holds its own pools and no other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from actuators.base import Actuator, unread_pools
from actuators.pool_reads import each_pool, logged
from models import ActionResult, ActuatorError, PermanentActuatorError, PoolState


class RoutingActuator:
    """``routes`` maps each pool id to its actuator; one actuator may own several pools (listed once)."""

    def __init__(self, routes: Mapping[str, Actuator]) -> None:
        self._routes = dict(routes)
        self._unread: dict[str, ActuatorError] = {}

    def list_pools(self) -> Sequence[PoolState]:
        states: list[PoolState] = []
        unread: dict[str, ActuatorError] = {}
        seen: set[int] = set()
        for actuator in self._routes.values():
            if id(actuator) in seen:
                continue
            seen.add(id(actuator))
            try:
                states.extend(s for s in actuator.list_pools() if s.pool_id in self._routes)
            except ActuatorError as exc:
                owned = [pool_id for pool_id, owner in self._routes.items() if owner is actuator]
                for pool_id, error in each_pool(exc, owned).items():
                    logged(pool_id, error)
                    unread[pool_id] = error
                continue
            unread |= {p: e for p, e in unread_pools(actuator).items() if self._routes.get(p) is actuator}
        self._unread = unread
        return sorted(states, key=lambda s: s.pool_id)

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return self._unread

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        actuator = self._routes.get(pool_id)
        if actuator is None:
            raise PermanentActuatorError(
                pool_id, f"no actuator owns this pool (known: {', '.join(sorted(self._routes))})"
            )
        return actuator.resize(pool_id, to_units, key)
