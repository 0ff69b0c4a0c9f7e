"""RoutingActuator: several actuators presented as one, each pool routed to the actuator that owns it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from actuators.base import Actuator
from models import ActionResult, PermanentActuatorError, PoolState


class RoutingActuator:
    """``routes`` maps each pool id to its actuator; one actuator may own several pools (listed once)."""

    def __init__(self, routes: Mapping[str, Actuator]) -> None:
        self._routes = dict(routes)

    def list_pools(self) -> Sequence[PoolState]:
        states: list[PoolState] = []
        seen: set[int] = set()
        for actuator in self._routes.values():
            if id(actuator) in seen:
                continue
            seen.add(id(actuator))
            states.extend(s for s in actuator.list_pools() if s.pool_id in self._routes)
        return sorted(states, key=lambda s: s.pool_id)

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        actuator = self._routes.get(pool_id)
        if actuator is None:
            raise PermanentActuatorError(
                pool_id, f"no actuator owns this pool (known: {', '.join(sorted(self._routes))})"
            )
        return actuator.resize(pool_id, to_units, key)
