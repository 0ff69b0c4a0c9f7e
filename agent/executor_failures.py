"""What the executor counts of a pool's failures, and when it tells of them and backs the pool off.

Two counts are kept in the planner memory, apart. Failing changes (``_failing``): a change refused with an error a
retry may fix, or a drain failed so, starts or extends since when the pool's changes keep failing; once that has
lasted the pool's lead time each failure raises an ``actuator-failure`` warning, and a failing scale-up backs the pool
off. The count ends after a lead time (at least ``MIN_BACKOFF``) without a failure, from the last one or from the end
of its back-off (``_stopped``, ``_stopped_failing``). Failed units (``_units_failing``): units the cloud accepted and
then failed for a reason other than capacity or quota, as their adapter reads it (``_failed_for_capacity``), start or
extend since when the pool's units keep failing, told and backed off the same way once that has lasted the pool's lead
time; the count ends once the pool is read with no unit failed a lead time after the last one and none in flight, or
two lead times after it with units in flight (``IN_FLIGHT_LEAD_TIMES``, ``_units_stopped_failing``).
Units failed for want of capacity in some zones of a pool that spans zones, or for an error confined to their zone
(``ZoneState.failed_in_zone``: a reservation of the zone used up), leave its other zones to take the nodes
(``_zones_with_room``, ``_zone_stockout_alert``). A stockout alert quotes the provider's messages for the failed
units, and says to have a quota raised where the adapter read one as a quota used up (``_stockout_alert``); its
summary quotes the first of them and counts the rest, all of them in its ``error`` detail (``_quoted``), so that what
was done and what to do are never cut off where Slack cuts a long text. A pool
blocked after a permanent error is told with ``blocked_alert``, which says how to unblock it (``UNBLOCK``).

``agent.executor`` carries out the changes and removes the failed units, and calls these; their log lines keep its
logger's name, as they did before they moved here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from models import AlertEvent, AlertKind, PoolSpec, PoolState, Severity
from models.durations import format_duration

log = logging.getLogger("agent.executor")
MIN_BACKOFF = timedelta(minutes=10)
UNBLOCK = (
    "fix the cause, then remove the pool from `blocked` in the planner memory (the ConfigMap named by "
    "daemon.state.config_map_name, leadtime-state by default, key planner-memory.json) or delete that ConfigMap; "
    "the leader reads it every tick"
)
# A quota used up does not clear while the pool backs off: each scale-up past it fails again until it is raised.
QUOTA_ADVICE = (
    "A quota is used up, and it does not clear by itself: request a quota increase from the cloud provider (AWS: "
    "Service Quotas; Google Cloud: the Quotas page of IAM & Admin); until then every scale-up of the "
    "pool past it fails again and backs the pool off"
)
# The longest provider message a summary quotes whole: Slack cuts a section's text and the fallback line at 3,000
# characters, and the summary's end says what the agent did and what the operator should do.
QUOTED_MAX = 1000
# How many lead times a unit in flight keeps its pool's count of failing units after the last failure: the
# stalled-scale-up alert's default (``alerts.stalled_after_lead_times``) tells of a unit not arrived by then.
IN_FLIGHT_LEAD_TIMES = 2


def _failing(
    pool_id: str,
    error: str,
    since: datetime,
    now: datetime,
    pools: Mapping[str, PoolSpec],
    memory: PlannerMemory,
    alerts: list[AlertEvent],
    scale_up: bool = False,
) -> PlannerMemory:
    """A change of the pool failed with an error a retry may fix (failing since ``since``): remember since when the
    pool's changes keep failing; from the pool's lead time on, alert, and back a failing scale-up off."""
    if _stopped(memory, pool_id, pools, now):  # the earlier failures ended long ago: this one starts a new count
        memory = memory.not_failing(pool_id)
    memory = memory.failing(pool_id, since, now)
    first = memory.failing_since[pool_id]
    spec = pools.get(pool_id)
    lead = spec.lead_time if spec is not None else MIN_BACKOFF
    if now - first < lead:
        log.warning("pool %s: change failed (failing since %s), retrying: %s", pool_id, first.isoformat(), error)
        return memory
    summary = (
        f"Changes to {pool_id} have kept failing for {format_duration(now - first)}, longer than its lead time "
        f"({format_duration(lead)}): {error}"
    )
    if scale_up:
        backoff = max(MIN_BACKOFF, lead)
        summary += f"; backing off {format_duration(backoff)} and using the next pool"
        memory = memory.back_off(pool_id, now + backoff, BackoffReason.FAILING_CHANGES)
    log.error("pool %s: %s", pool_id, summary)
    details = {"error": error, "failing_since": first.isoformat(), "failing_for": format_duration(now - first)}
    alerts.append(AlertEvent(AlertKind.ACTUATOR_FAILURE, Severity.WARNING, now, pool_id, summary, details))
    return memory


def _stopped_failing(memory: PlannerMemory, pools: Mapping[str, PoolSpec], now: datetime) -> PlannerMemory:
    """The memory without the failing count of each pool whose changes have stopped failing (``_stopped``)."""
    for pool_id in sorted(memory.failing_since):
        if _stopped(memory, pool_id, pools, now):
            log.info("pool %s: no change of it has failed for a lead time; its changes are no longer failing", pool_id)
            memory = memory.not_failing(pool_id)
    return memory


def _stopped(memory: PlannerMemory, pool_id: str, pools: Mapping[str, PoolSpec], now: datetime) -> bool:
    """Whether the pool's changes, once failing, have gone the pool's lead time (at least ``MIN_BACKOFF``) without a
    failure, counted from the last one or from the end of the pool's back-off (nothing is asked of it meanwhile)."""
    last = memory.failed_last(pool_id)
    if last is None:
        return False
    until = memory.backoff_until.get(pool_id)
    quiet_since = last if until is None else max(last, until)
    spec = pools.get(pool_id)
    return now - quiet_since >= max(MIN_BACKOFF, spec.lead_time if spec is not None else MIN_BACKOFF)


def _failed_for_capacity(state: PoolState) -> bool:
    """Whether a pool's failed units count as a stockout: yes unless its actuator gives a message for each and read
    none of them as a stockout or an exhausted quota (``PoolState.failed_for_capacity``: only the adapter knows its
    provider's words for those; Google's and AWS's share none). Failed units an actuator says nothing of are a
    stockout, as before."""
    return len(state.failed_messages) != state.failed_units or state.failed_for_capacity


def _failed_units(state: PoolState) -> str:
    return (
        f"deleting {state.failed_units} failed units, none failed for want of capacity or quota "
        f"({'; '.join(m or 'no message' for m in state.failed_messages)})"
    )


def _units_failing(
    state: PoolState, now: datetime, spec: PoolSpec, memory: PlannerMemory, alerts: list[AlertEvent]
) -> PlannerMemory:
    """Units of the pool failed for a reason other than capacity and were removed: remember since when its units
    keep failing so. Once that has lasted the pool's lead time (units asked for again failed again), alert and back
    the pool off, as failing changes do: asked for again at once, the same units would fail the same way."""
    pool_id = state.pool_id
    memory = memory.units_failed(pool_id, now)
    first = memory.units_failing_since[pool_id]
    if now - first < spec.lead_time:
        log.info("pool %s: %s; no back-off", pool_id, _failed_units(state))
        return memory
    error = "; ".join(m or "no message" for m in state.failed_messages)
    quoted = _quoted(tuple(dict.fromkeys(m or "no message" for m in state.failed_messages)))
    summary = (
        f"Units of {pool_id} have kept failing for {format_duration(now - first)}, longer than its lead time "
        f"({format_duration(spec.lead_time)}), none for want of capacity or quota: {quoted}; removed "
        f"{state.failed_units} failed units"
    )
    if not memory.in_backoff(pool_id, now):
        backoff = max(MIN_BACKOFF, spec.lead_time)
        summary += f", backing off {format_duration(backoff)} and using the next pool"
        memory = memory.back_off(pool_id, now + backoff, BackoffReason.FAILING_CHANGES)
    log.error("pool %s: %s", pool_id, summary)
    details = {
        "error": error,
        "failing_since": first.isoformat(),
        "failing_for": format_duration(now - first),
        "failed_units": str(state.failed_units),
    }
    alerts.append(AlertEvent(AlertKind.ACTUATOR_FAILURE, Severity.WARNING, now, pool_id, summary, details))
    return memory


def _units_stopped_failing(
    memory: PlannerMemory, states: Mapping[str, PoolState], pools: Mapping[str, PoolSpec], now: datetime
) -> PlannerMemory:
    """The memory without the count of each pool whose units have stopped failing: read with none failed, a lead
    time (at least ``MIN_BACKOFF``) after the last failed one or the end of the back-off it caused, whichever is
    later, and none in flight (every unit asked for since arrived). A unit still in flight may fail yet, though it
    takes longer than the lead time (a slice GKE fails after 30 minutes on a 20-minute group), so it keeps the count,
    but for ``IN_FLIGHT_LEAD_TIMES`` lead times at most: one not arrived by then is a stalled scale-up, told as such,
    and a pool that is always creating units (its demand growing) would otherwise keep the count for ever, a single
    unit failing hours later told as failing for hours and backing the pool off."""
    for pool_id in sorted(memory.units_failing_since):
        state = states.get(pool_id)
        if state is None or state.failed_units:
            continue
        last = memory.units_failed_last.get(pool_id, memory.units_failing_since[pool_id])
        until = memory.backoff_until.get(pool_id)
        quiet_since = last if until is None else max(last, until)
        spec = pools.get(pool_id)
        quiet_for = max(MIN_BACKOFF, spec.lead_time if spec is not None else MIN_BACKOFF)
        if state.provisioning_units:
            quiet_for *= IN_FLIGHT_LEAD_TIMES
        if now - quiet_since >= quiet_for:
            in_flight = f"{state.provisioning_units} still in flight" if state.provisioning_units else "none in flight"
            log.info(
                "pool %s: no unit of it has failed for %s (%s); no longer failing",
                pool_id, format_duration(now - quiet_since), in_flight,
            )  # fmt: skip
            memory = memory.units_not_failing(pool_id)
    return memory


def _zones_with_room(state: PoolState, now: datetime) -> list[str]:
    """Zones of a pool that spans zones where nothing failed and that are not backed off; none when a unit failed for
    a quota used up (``PoolState.failed_for_quota``): a cloud's quotas are regional or global, so the pool's other
    zones meet the same one."""
    if state.failed_for_quota:
        return []
    return [z.zone for z in state.zones if z.failed_units == 0 and (z.backoff_until is None or z.backoff_until <= now)]


def _reasons(state: PoolState) -> tuple[str, ...]:
    """The distinct messages the provider gave for the pool's failed units, in order; none when it gave none."""
    return tuple(dict.fromkeys(m for m in state.failed_messages if m))


def _quoted(messages: Sequence[str]) -> str:
    """What a summary quotes of the provider's messages: the first (cut at ``QUOTED_MAX``), and how many more the
    alert's ``error`` detail holds. Each message may name its own instance (GKE's do), so 40 failed units quoted
    whole made a summary of 4,671 characters, whose end (the back-off, the quota advice) Slack cut off."""
    if not messages:
        return ""
    first, cut = messages[0], len(messages[0]) > QUOTED_MAX
    if cut:
        first = f"{first[: QUOTED_MAX - 3].rstrip()}..."
    if len(messages) > 1:
        return f"{first} and {len(messages) - 1} more (see error)"
    return f"{first} (see error)" if cut else first


def _stockout_alert(state: PoolState, backoff: timedelta, now: datetime) -> AlertEvent:
    """The stockout alert of a pool whose failed units were removed and which backs off: it quotes the provider's
    reasons, and where the adapter read one as a quota used up (``PoolState.failed_for_quota``), which no back-off
    clears, says what to do (``QUOTA_ADVICE``)."""
    reasons = _reasons(state)
    why = f": {_quoted(reasons)}" if reasons else " (no capacity, suspended or in error)"
    summary = (
        f"{state.failed_units} units of {state.pool_id} failed after the request was accepted{why}; removed them, "
        f"backing off {format_duration(backoff)} and using the next pool"
    )
    details = {"failed_units": str(state.failed_units), "target_units": str(state.target_units)}
    if reasons:
        details["error"] = "; ".join(reasons)
    if state.failed_for_quota:
        summary += f". {QUOTA_ADVICE}"
        details["action"] = QUOTA_ADVICE
    return AlertEvent(AlertKind.STOCKOUT, Severity.WARNING, now, state.pool_id, summary, details)


def _zone_stockout_alert(state: PoolState, spare: Sequence[str], now: datetime) -> AlertEvent:
    """The alert of a pool whose units failed in some zones while others have room. It names as backing off the zones
    whose units failed for capacity (``ZoneState.failed_for_capacity``, or every zone with failed units where the
    actuator cannot tell) and those whose units failed for an error confined to the zone (``failed_in_zone``: a
    reservation of the zone used up), each for its cause; a zone whose units failed for a reason of their own that
    every zone meets is not backed off (a GKE subnet out of addresses is its region's, which every zone of the pool
    draws from: moving its share to another zone buys nothing), and is named so, with the zones that take the nodes
    at the next scale-up."""
    told = len(state.failed_messages) == state.failed_units  # a message for each: the actuator read their causes
    failed = [z for z in state.zones if z.failed_units]
    out = [z.zone for z in failed if z.failed_for_capacity or not told]
    out_own = [z.zone for z in failed if z.failed_in_zone and z.zone not in out]
    own = [z.zone for z in failed if z.zone not in out and z.zone not in out_own]
    open_own = [z.zone for z in failed if z.zone in own and (z.backoff_until is None or z.backoff_until <= now)]
    taking = [z.zone for z in state.zones if z.zone in spare or z.zone in open_own]
    reasons = _reasons(state)
    zones_out = ",".join([*out, *out_own])
    details = {"failed_units": str(state.failed_units), "zones_out": zones_out, "zones_open": ",".join(taking)}
    if reasons:
        details["error"] = "; ".join(reasons)
    why = f": {_quoted(reasons)}" if reasons else ""
    backing = [f"{', '.join(out)} {_verb(out, 'backs', 'back')} off for want of capacity"] if out else []
    if out_own:
        backing.append(
            f"{', '.join(out_own)} {_verb(out_own, 'backs', 'back')} off for the units that failed there for a reason "
            f"confined to {_verb(out_own, 'that zone', 'those zones')}, not for capacity (see error)"
        )
    summary = (
        f"{state.failed_units} units of {state.pool_id} failed in {', '.join(z.zone for z in failed)} after the "
        f"request was accepted{why}; removed them, {', '.join(backing)} and {', '.join(taking)} "
        f"{_verb(taking, 'takes', 'take')} the nodes"
    )
    if own:
        summary += (
            f"; {', '.join(own)} {_verb(own, 'is', 'are')} not backed off for the units that failed there for a "
            "reason of their own that every zone meets, not for capacity (see error): removed and asked for again, "
            "they back the pool off once its units have kept failing so for its lead time"
        )
    return AlertEvent(AlertKind.STOCKOUT, Severity.WARNING, now, state.pool_id, summary, details)


def _verb(zones: Sequence[str], one: str, many: str) -> str:
    return one if len(zones) == 1 else many


def blocked_alert(pool_id: str, now: datetime, error: str) -> AlertEvent:
    """The critical alert of a pool blocked after a permanent error, saying how to unblock it (``UNBLOCK``)."""
    return AlertEvent(
        AlertKind.ACTUATOR_FAILURE,
        Severity.CRITICAL,
        now,
        pool_id,
        f"Stopped touching {pool_id} after a permanent error; nothing is sent to it until it is unblocked: {UNBLOCK}",
        {"error": error},
    )
