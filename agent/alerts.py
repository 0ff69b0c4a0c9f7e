"""What the agent tells people about its pools, demand classes and scale-ups, as ``AlertEvent`` values: pure
builders, one per condition worth a message; those about budgets are in ``agent.budget_alerts``.

The loop decides when a condition holds and hands the events to a Notifier, which de-duplicates by
``AlertEvent.dedup_key`` (kind, subject and severity; a higher severity is never a repeat of a lower one): subjects
here name the budget, pool or demand class, so one message goes out per condition per window, not one per tick.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

# a scale-up waited for is kept in the planner memory, so that a new leader waits for it from when it was asked
from agent.planning.memory import PendingScaleUp
from models import AlertEvent, AlertKind, CapacityPlan, PoolSpec, PoolState, Severity

__all__ = [
    "PendingScaleUp",
    "alert_time",
    "broken_unit_events",
    "missing_data_events",
    "missing_zone_events",
    "outstanding",
    "stalled_scale_up_events",
    "unheld_reserve_events",
]


def outstanding(pending: Iterable[PendingScaleUp], states: Mapping[str, PoolState]) -> list[PendingScaleUp]:
    """The scale-ups still waiting: their pool is not yet ready at the asked size and was not asked for less. The units
    the pool reports being recreated (``PoolState.recreating_units``: a repair of a unit that ran) or refreshed in place
    (``PoolState.refreshing_units``: an instance refresh replacing root volumes) count as arrived: neither is the
    scale-up's to wait for, and neither holds its wait open."""
    out = []
    for scale_up in pending:
        state = states.get(scale_up.pool_id)
        if state is None:
            out.append(scale_up)  # unobserved: still owed
        elif (
            state.ready_units + state.recreating_units + state.refreshing_units
            < scale_up.to_units
            <= state.target_units
        ):
            out.append(scale_up)
    return out


def stalled_scale_up_events(
    pending: Iterable[PendingScaleUp],
    states: Mapping[str, PoolState],
    pools: Mapping[str, PoolSpec],
    now: datetime,
    factor: float = 2.0,
) -> list[AlertEvent]:
    """Scale-ups still not ready after ``factor`` times their pool's lead time. One whose pool could not be read
    (missing from ``states``) is neither: its units may have come (the pool-unreadable alert tells the read), and it is
    judged on its whole wait once its pool is read again."""
    events = []
    for scale_up in outstanding(pending, states):
        spec, state = pools.get(scale_up.pool_id), states.get(scale_up.pool_id)
        if spec is None or state is None:
            continue
        waited = now - scale_up.requested_at
        if waited < spec.lead_time * factor:
            continue
        ready = str(state.ready_units)
        asked = "found in flight at a leader's first read" if scale_up.inherited else "asked"
        events.append(
            AlertEvent(
                kind=AlertKind.STALLED_SCALE_UP,
                severity=Severity.WARNING,
                at=now,
                subject=f"pool {scale_up.pool_id}",
                summary=(
                    f"Scale-up of {scale_up.pool_id} to {scale_up.to_units} units, {asked} at "
                    f"{alert_time(scale_up.requested_at)}, is still not ready after {_duration(waited)} "
                    f"(lead time {_duration(spec.lead_time)})."
                ),
                details={"ready units": ready, "asked": f"{scale_up.from_units} -> {scale_up.to_units} units"},
            )
        )
    return events


def missing_data_events(problems: Mapping[str, str], at: datetime) -> list[AlertEvent]:
    """One event per demand class without trustworthy demand (its pools are held), the class as its subject: a
    class that loses its data while another is already out is a new condition and gets a message of its own, and
    a class that stays out is told once per window, whatever happens to the others."""
    return [
        AlertEvent(
            kind=AlertKind.MISSING_DATA,
            severity=Severity.WARNING,
            at=at,
            subject=f"demand class {name}",
            summary=f"Holding pools: no trustworthy demand for {name}",
            details={name: problems[name]},
        )
        for name in sorted(problems)
    ]


def broken_unit_events(states: Mapping[str, PoolState], at: datetime) -> list[AlertEvent]:
    """One critical event per pool with broken units (``PoolState.broken_units``), the pool as its subject, raised
    every tick while they last: each unit is named with what is wrong with it. The agent buys units in their place
    and never removes them while work runs on them, and they are paid for all that time (a hung job keeps them
    busy for ever): only a person can decide to delete them."""
    events = []
    for pool_id, state in sorted(states.items()):
        if not state.broken_units:
            continue
        names = ", ".join(name for name, _ in state.broken_units)
        events.append(
            AlertEvent(
                kind=AlertKind.BROKEN_UNIT,
                severity=Severity.CRITICAL,
                at=at,
                subject=pool_id,
                summary=(
                    f"{names} of {pool_id} cannot run its work but has work on it: a unit is bought in its place, "
                    "and it is paid for and never deleted while busy; a person must decide whether to delete it"
                ),
                details=dict(state.broken_units),
            )
        )
    return events


def missing_zone_events(states: Mapping[str, PoolState], at: datetime) -> list[AlertEvent]:
    """One critical event per pool with zones it lists but whose units cannot be read
    (``PoolState.missing_zones``: a GKE node pool's instance group gone), raised every tick while they last: the
    pool is planned on its other zones, and only a person can bring the zone back."""
    return [
        AlertEvent(
            kind=AlertKind.POOL_UNREADABLE,
            severity=Severity.CRITICAL,
            at=at,
            subject=f"zones of {pool_id}",
            summary=(
                f"{pool_id} lists zones {', '.join(zone for zone, _ in state.missing_zones)} whose units cannot be "
                "read: they are left out, their nodes not counted, and the pool is planned on its other zones"
            ),
            details=dict(state.missing_zones),
        )
        for pool_id, state in sorted(states.items())
        if state.missing_zones
    ]


def unheld_reserve_events(plan: CapacityPlan, at: datetime) -> list[AlertEvent]:
    """One warning per spot pool whose interruption reserve is in part held nowhere (``ReserveCarry.target`` None:
    the pool cannot hold it, at its bound or unable to grow, and no pool that may serve its demand has room), raised
    every tick while it lasts, naming the units not held: the plan holds less against preemption than
    ``spot_interruption_per_hour`` asks for, which its decision record alone would not tell anyone."""
    events = []
    for pool_id, decision in sorted(plan.decisions.items()):
        mine = [c for c in decision.reserve_carries if c.source == pool_id]
        unheld = sum(c.chips for c in mine if c.target is None)
        if unheld <= 1e-9:
            continue
        units = unheld / decision.chips_per_unit
        elsewhere = "; ".join(f"{c.chips:g} chips in {c.target}" for c in mine if c.target is not None)
        events.append(
            AlertEvent(
                kind=AlertKind.SPOT_RESERVE_UNHELD,
                severity=Severity.WARNING,
                at=at,
                subject=f"spot reserve of {pool_id}",
                summary=(
                    f"{units:g} of the {decision.spot_reserve_units} units {pool_id} keeps in reserve against "
                    f"preemption are not held ({unheld:g} chips): {pool_id} cannot hold them and no pool that may "
                    "serve its demand has room, so fewer units are planned than its spot reserve asks for. Raise "
                    f"the max_units of a pool that may serve its demand, or of {pool_id}"
                ),
                details={
                    "not held": f"{units:g} units ({unheld:g} chips)",
                    "held by other pools": elsewhere or "none",
                    "decision": decision.why(),
                },
            )
        )
    return events


def alert_time(at: datetime) -> str:
    """How every alert writes a time: to the minute, in UTC."""
    return at.strftime("%Y-%m-%d %H:%M UTC")


def _duration(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"
