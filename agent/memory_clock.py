"""The planner memory taken back within each tick's clock, and the warning when it was ahead.

A tick that ran while the wall clock was ahead (a VM resumed with a clock hours fast, then stepped back by NTP; a
replica whose clock runs ahead, whose memory the next leader reads) wrote wall times the corrected clock reaches only
after the step: a stockout's back-off, a pool's last change, its failures. Each tick first moves them back within
its clock (``PlannerMemory.within_clock``): a back-off to end no later than now and the longest back-off a tick sets
for its pool (``max(MIN_BACKOFF, lead_time)``), the rest to now. Moves beyond ``CLOCK_SKEW`` (replicas' clocks kept by
NTP differ by well under a second) are logged, once: the memory saved afterwards holds the corrected times.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from agent.executor_failures import MIN_BACKOFF
from agent.planning import PlannerMemory
from agent.planning.memory import CLOCK_SKEW
from models import PoolSpec

log = logging.getLogger(__name__)


def memory_within_clock(memory: PlannerMemory, now: datetime, pools: Mapping[str, PoolSpec]) -> PlannerMemory:
    """``memory`` with no time later than the clock allows at ``now`` for ``pools``; the moves logged."""
    within, ahead = memory.within_clock(now, {p: max(MIN_BACKOFF, spec.lead_time) for p, spec in pools.items()})
    if ahead and max(ahead.values()) > CLOCK_SKEW:
        log.warning(
            "planner memory: times up to %s later than now (%s), written while the wall clock was ahead: it was "
            "stepped back since (NTP, a resumed VM) or the replica that saved them runs ahead; check the nodes' time "
            "sync. Each is moved back to now (a back-off to now and the pool's longest back-off): %s",
            max(ahead.values()),
            now.isoformat(timespec="seconds"),
            "; ".join(sorted(ahead)),
            extra={"ahead_s": {what: by.total_seconds() for what, by in sorted(ahead.items())}},
        )
    return within
