"""Trimming scale-ups to the budget caps. Pure: ``agent.planning.enforcement`` calls ``trim_scale_ups`` with the
planner's proposed targets and the caps' room.

A scale-up (a proposed absolute target above the units billed now) that would take any cap's projection above the
cap is cut to what fits, in whole units, with a ``SkipReason.BUDGET`` skip naming the budget. Room is handed out in
fill order (on-prem, reserved, spot, on-demand; then price per chip), so the scale-ups the planner would fill first
are the last to be trimmed. Releases proposed in the same tick are not counted as room: a release may still be
refused, and the cap must hold either way.

A scale-up commits spend for at least its minimum hold: the pool's lead time, the idle window before a unit may
be released, and one tick. When that reaches past the end of the month period, the units are still there when
the next period opens, and the projection then runs them to the end of that period: such a scale-up must also
fit the next period's cap, with everything billed now counted over the whole of it. (Units bought earlier can
still be released before the period ends if they turn out idle; busy units never are, whatever a cap says.)

A budget pool nobody knows the units of (``budget_caps.unknown_pools``) is counted at its ``max_units`` here
(``Cap.unknown_usd``), so a missing value never lets the agent's own commitment run past a cap. Where a hard stop
holds the cap (a ``commit_horizon``), over each scale-up's own hold only (lead time, idle window and one tick, what
the units granted commit before the stop may take them back): counting it to the period's end there held every
scale-up of the budget's other pools for as long as the pool stayed unread (days, for a permission not granted yet),
while the stop waits for it ``unread_stop_wait`` only. Without one, to the period's end: busy units granted are never
released and bill to its end, so a grant fitted over the hold alone committed the period past the cap once the pool
was read. The trim's skip names it and the USD kept back; where the cut is deeper for it than the units known alone
would make it, the trim records that USD (``Trim.unknown_usd``) and a ``pool-unreadable`` alert of the budget tells
it (``agent.budget_unknown_pools``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.planning.budget import CapKind
from agent.planning.budget_caps import EPS_USD, Cap
from models import PoolSpec, Skip, SkipReason
from models.durations import format_duration


@dataclass(frozen=True)
class Trim:
    """A scale-up cut short by a cap: the pool wanted ``wanted_units`` and may have ``allowed_units``."""

    pool_id: str
    billed_units: int
    wanted_units: int
    allowed_units: int
    budget: str
    cap: CapKind
    label: str = field(default="", compare=False)  # the binding cap, as the skip names it
    room_usd: float = field(default=0.0, compare=False)  # the cap's room left once the trimmed scale-up is counted
    # the room the pools nobody knows the units of kept back (``Cap.unknown_usd``), where the cut would have been
    # smaller without it; 0 where they changed nothing
    unknown_usd: float = field(default=0.0, compare=False)


def trim_scale_ups(
    now: datetime,
    caps: list[Cap],
    pools: Mapping[str, PoolSpec],
    base: Mapping[str, int],
    targets: dict[str, int],
    holds: Mapping[str, timedelta],
) -> tuple[list[Trim], list[Skip]]:
    """Grant scale-ups in fill order while every cap over the pool keeps its projection within the cap. A next
    period's cap binds a pool's scale-up only when the pool's minimum hold (``holds``) reaches into it. A cap's pools
    nobody knows the units of take their ``max_units`` (over that hold, or to the period's end: ``Cap.unknown_span``)
    out of its room for the scale-up, and out of nothing else."""
    trims: list[Trim] = []
    skips: list[Skip] = []
    ups = sorted((p for p, t in targets.items() if p in pools and t > base[p]), key=lambda p: pools[p].fill_key)
    for pool_id in ups:
        wanted = targets[pool_id] - base[pool_id]
        allowed, binding, held_back = wanted, None, 0.0
        known_allow = wanted  # what the caps would allow were the unknown pools counted at nothing
        binds = [c for c in caps if pool_id in c.pools and (not c.crossing or now + holds[pool_id] > c.period.start)]
        for cap in binds:
            per_unit = pools[pool_id].price_per_unit_hour_usd * cap.hours_left(now)
            if per_unit <= 0.0:
                continue
            unknown_usd = cap.unknown_usd(now, pools, holds[pool_id])
            fits = max(0, math.floor((cap.room_usd - unknown_usd + EPS_USD) / per_unit))
            known_allow = min(known_allow, max(0, math.floor((cap.room_usd + EPS_USD) / per_unit)))
            if fits < allowed:
                allowed, binding, held_back = fits, cap, unknown_usd
        for cap in binds:
            cap.room_usd -= allowed * pools[pool_id].price_per_unit_hour_usd * cap.hours_left(now)
        if binding is None:
            continue
        targets[pool_id] = base[pool_id] + allowed
        room = max(0.0, binding.room_usd)
        unknown = ""
        if binding.unknown:
            span = binding.unknown_span(holds[pool_id])
            over = (
                f"over the {format_duration(holds[pool_id])} this scale-up holds its units (lead time + idle window "
                f"+ one tick)"
                if span is not None
                else "to the period's end (no commit_horizon: units granted are never released while busy)"
            )
            unknown = (
                f"; counting {', '.join(binding.unknown)}, not read and with no record of what it holds, at its "
                f"max_units {over}: {held_back:,.2f} USD of the room kept back"
            )
        trims.append(
            Trim(
                pool_id,
                base[pool_id],
                base[pool_id] + wanted,
                targets[pool_id],
                binding.budget,
                binding.kind,
                binding.label,
                room,
                held_back if allowed < known_allow else 0.0,
            )
        )
        skips.append(
            Skip(
                pool_id,
                SkipReason.BUDGET,
                f"{binding.label} allows {allowed} of {wanted} more units "
                f"({base[pool_id]}->{targets[pool_id]} instead of ->{base[pool_id] + wanted}); "
                f"{room:,.2f} USD of room left to period end{unknown}",
            )
        )
    return trims, skips
