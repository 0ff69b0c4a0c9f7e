"""Reading pools apart: one pool whose state cannot be read is left out of ``list_pools`` and reported, instead of
failing the read of every pool (see ``actuators.base.ReportsUnreadPools``).

A permission missing on one project, an API not enabled, a rate limit or a server error on one pool's call fails
that pool's read only: the planner holds it as unobserved, the agent alerts on it, and the other pools (of the same
adapter and of every other cloud) are read and planned as usual. Each failure is logged with its pool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from models import ActuatorError, PermanentActuatorError, PoolState

log = logging.getLogger(__name__)


class PoolReads:
    """What an adapter's latest ``list_pools`` could not read; ``unread`` answers its ``unread_pools``."""

    def __init__(self) -> None:
        self.unread: Mapping[str, ActuatorError] = {}

    def each(self, pool_ids: Iterable[str], observe: Callable[[str], PoolState]) -> list[PoolState]:
        """``observe`` each pool with its own calls; a pool whose read fails is left out and remembered."""
        states: list[PoolState] = []
        unread: dict[str, ActuatorError] = {}
        for pool_id in pool_ids:
            try:
                states.append(observe(pool_id))
            except ActuatorError as exc:
                unread[pool_id] = for_pool(exc, pool_id)
        self.remember(unread)
        return states

    def none(self, pool_ids: Iterable[str], exc: ActuatorError) -> list[PoolState]:
        """One call that reads all these pools failed: none of them is read."""
        self.remember(each_pool(exc, pool_ids))
        return []

    def remember(self, unread: Mapping[str, ActuatorError]) -> None:
        """``unread`` is the latest read's failures; each is logged."""
        for pool_id, exc in unread.items():
            logged(pool_id, exc)
        self.unread = dict(unread)


def logged(pool_id: str, exc: ActuatorError) -> None:
    level = logging.ERROR if isinstance(exc, PermanentActuatorError) else logging.WARNING
    log.log(
        level,
        "pool state not read, the pool is held pool=%s error=%s reason=%r",
        pool_id,
        type(exc).__name__,
        exc.reason,
    )


def for_pool(exc: ActuatorError, pool_id: str) -> ActuatorError:
    """``exc`` as ``pool_id``'s error (same kind, same reason): a failed call that read several pools fails each."""
    return exc if exc.pool_id == pool_id else type(exc)(pool_id, exc.reason)


def each_pool(exc: ActuatorError, pool_ids: Iterable[str]) -> dict[str, ActuatorError]:
    return {pool_id: for_pool(exc, pool_id) for pool_id in pool_ids}
