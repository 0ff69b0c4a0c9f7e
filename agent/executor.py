"""Carrying out a plan: re-validate each action on freshly observed state, then act, translating outcomes.

Only this module calls an actuator's or a drainer's write methods. Outcomes update the planner's memory: a stockout
backs the pool off (the next plan fills the next eligible pool), a permanent error blocks the pool until a person
looks. Units a pool reports failed (a stockout found after an accepted request) are removed and their pool backed
off before the tick plans. A pool served by a node drainer never shrinks by a size change: its releases become
drains of exactly the nodes the pool's decision record names, re-checked idle (``agent.drains``), and drains still
waiting on a disruption budget go on every tick. The plan sees such a pool without its draining nodes while the
cloud's target still counts them, so a scale-up is sent as the planned change applied to the cloud's target: a
resize never takes a pool below the cloud's target less the nodes the drainer emptied, nor a scale-up above the
pool's ``max_units`` (what does not fit waits for the drains to end). A scale-up first takes back idle nodes the
drainer is still draining (``NodeDrains.take_back``) and buys only the rest; on a pool in a budget never more than
the budget counted as new: the units of drains it could not end wait for the next plan. A forced release
(``Resize.forced``, a budget's hard stop) is checked against fresh state like any action; on a pool without a
drainer it is a plain resize, on a pool with one it drains busy nodes too once the idle ones do not cover it, and is
never refused for busy nodes. A resize or release of a pool blocked after a permanent error is refused, whatever
planned it (the planner plans none, but a budget's release must not reach such a pool either); its drains already
in progress go on. While it stays blocked its critical alert, saying how to unblock it, is raised again every tick
(``blocked_pool_alerts``), also after a restart that read the block back. A pool whose state could not be read is
alerted on and held (planned as unobserved), not blocked: reading it changes nothing, and it is planned again once
it can be read.

A change refused with an error a retry may fix (a busy or upgrading cluster, a 5xx, throttling), a drain that
fails so or is given up at the drain timeout, is retried on later ticks; the memory keeps since when the pool's
changes keep failing (``PlannerMemory.failing_since``; a drain given up at its timeout failed since it started)
and when one last failed. The next accepted change or finished drain clears it, and so does a lead time (at least
``MIN_BACKOFF``) in which none of the pool's changes failed, counted from the last failure or from the end of the
back-off it caused, whichever is later: a tick that asks nothing of the pool tells nothing about it, so the count
outlasts a tick with no change planned (the need dipping, a tick that read no demand, the back-off itself), but a
pool that failed once and was then asked nothing for days is not "failing for days" when its next change fails.
Once the count has lasted the pool's lead time, every failure raises an ``actuator-failure`` warning naming the
pool, the error and for how long, and a failing scale-up backs the pool off as a stockout does: units asked for
that long ago would not be ready in time anyway, and while it is backed off the next eligible pool takes the
demand; when the back-off ends the scale-up is tried again.

Units the cloud accepted and then failed for a reason other than capacity (a slice broken after losing hosts, once
its job was stopped; a bad service account, a network problem, a wording no one knows) are removed with no back-off,
but the memory keeps since when the pool's units keep failing so (``PlannerMemory.units_failing_since``), apart
from the count of failing changes: the request that asks for the units again is accepted, and ends that one. Once
units have kept failing for the pool's lead time (those asked for again failed again), each removal raises the same
``actuator-failure`` warning and backs the pool off (``failing-changes``, no stockout). The count ends once the pool
is read with no unit failed or in flight a lead time (at least ``MIN_BACKOFF``) after the last failed one or the end
of its back-off: a single broken slice removed is never told.

A resize whose call raises an error no adapter translates fails the tick, counted first as a failing change of its
pool; what the executor did until then (results, alerts, the memory) stays with its caller (``Progress``).

How both counts are kept, ended and told is in ``agent.executor_failures``; how one resize is sent against the
cloud's target and its answer translated, in ``agent.executor_resizes``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from actuators.base import Actuator, unread_pools
from agent.drain_records import DrainOutcome
from agent.drains import NodeDrains
from agent.executor_failures import (
    MIN_BACKOFF,
    _failed_for_capacity,
    _failed_units,
    _failing,
    _stockout_alert,
    _stopped_failing,
    _units_failing,
    _units_stopped_failing,
    _zone_stockout_alert,
    _zones_with_room,
    blocked_alert,
)
from agent.executor_resizes import ACCEPTED, Sent, send_resize
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from models import (
    ActionResult,
    ActionStatus,
    AlertEvent,
    AlertKind,
    CapacityPlan,
    CapacityUnavailable,
    PermanentActuatorError,
    PoolSpec,
    PoolState,
    Resize,
    Severity,
    TransientActuatorError,
)

__all__ = [
    "MIN_BACKOFF",
    "Execution",
    "Progress",
    "blocked_pool_alerts",
    "clear_failed_units",
    "execute",
    "unread_pool_alerts",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Execution:
    results: tuple[ActionResult, ...]
    memory: PlannerMemory
    alerts: tuple[AlertEvent, ...] = field(default_factory=tuple)


@dataclass
class Progress:
    """What the executor did so far, kept as it acts: each action's result, its alerts and the planner memory they
    left. An error no adapter translates, raised part-way, fails the tick; its caller still has what was done before
    it (the claims of the releases sent stay: ``BudgetWatch.executed``; the pools changed, backed off or blocked stay
    so in the memory, and the alerts are told)."""

    memory: PlannerMemory
    results: list[ActionResult] = field(default_factory=list)
    alerts: list[AlertEvent] = field(default_factory=list)


def execute(
    plan: CapacityPlan,
    actuator: Actuator,
    pools: dict[str, PoolSpec],
    memory: PlannerMemory,
    now: datetime,
    drains: NodeDrains | None = None,
    progress: Progress | None = None,
) -> Execution:
    """Carry out ``plan`` (see the module's text), from ``memory``. ``progress``, where given, is kept as the
    executor acts (``Progress``): what it did until an error it raises."""
    done = Progress(memory) if progress is None else progress
    done.memory = memory
    _carry_out(plan, actuator, pools, now, drains, done)
    return Execution(tuple(done.results), _stopped_failing(done.memory, pools, now), tuple(done.alerts))


def _carry_out(
    plan: CapacityPlan,
    actuator: Actuator,
    pools: dict[str, PoolSpec],
    now: datetime,
    drains: NodeDrains | None,
    done: Progress,
) -> None:
    results, alerts = done.results, done.alerts
    if drains is not None:
        pending = DrainOutcome()
        try:
            drains.continue_pending(now, pending)
        finally:  # the steps taken before an error it raises too
            done.memory = _absorb(pending, pools, done.memory, now, results, alerts)
    if plan.is_empty:
        return
    cloud = {state.pool_id: state for state in actuator.list_pools()}
    unread = unread_pools(actuator)
    fresh = drains.adjusted(cloud) if drains is not None else cloud
    for resize in plan.resizes:
        if (why := done.memory.blocked.get(resize.pool_id)) is not None:
            detail = (
                f"{resize.pool_id} is blocked after a permanent error ({why}); nothing is sent to it until the cause "
                "is fixed and the pool is unblocked"
            )
            results.append(ActionResult(resize.key, resize.pool_id, ActionStatus.REJECTED, now, detail))
            log.warning("action pool=%s from=%d to=%d refused: %s", resize.pool_id, resize.from_units,
                        resize.to_units, detail)  # fmt: skip
            continue
        state = fresh.get(resize.pool_id)
        if state is None or state.target_units != resize.from_units:
            seen = "gone" if state is None else f"{state.target_units} units"
            if resize.pool_id in unread:
                seen = f"unreadable ({unread[resize.pool_id].reason})"
            detail = f"planned from {resize.from_units} units but the pool is now {seen}; re-planning next tick"
            results.append(ActionResult(resize.key, resize.pool_id, ActionStatus.REJECTED, now, detail))
            continue
        if drains is not None and drains.serves(resize.pool_id) and not resize.is_scale_up:
            decision = plan.decisions.get(resize.pool_id)
            outcome = DrainOutcome()
            try:  # each drain's result as it is had: those started before an error it raises count
                drains.scale_down(resize, now, decision.nodes if decision is not None else (), outcome)
            finally:
                if any(r.status in ACCEPTED for r in outcome.results):
                    done.memory = done.memory.changed(resize.pool_id, now, -1)
                done.memory = _absorb(outcome, pools, done.memory, now, results, alerts)
        else:
            taken: list[str] = []
            if drains is not None and drains.serves(resize.pool_id) and resize.is_scale_up:
                taken = drains.take_back(resize.pool_id, resize.to_units - resize.from_units, now)
            decision = plan.decisions.get(resize.pool_id)
            capped = decision is not None and bool(decision.budgets)
            sent = Sent(cloud[resize.pool_id], state, taken, capped)
            try:
                done.memory = send_resize(resize, sent, actuator, pools, done.memory, now, results, alerts)
            except Exception as exc:  # no adapter translated it, and the tick fails: counted as a failed change
                _raised(resize, exc, pools, now, done)
                raise
        log.info(
            "action pool=%s from=%d to=%d status=%s reason=%r",
            resize.pool_id,
            resize.from_units,
            resize.to_units,
            results[-1].status,
            resize.reason,
        )


def _raised(resize: Resize, exc: Exception, pools: dict[str, PoolSpec], now: datetime, done: Progress) -> None:
    """Count a resize whose call raised an error no adapter translates as a failed change of its pool
    (``_failing``), and record its failed result; a release's may have reached the cloud (``unclear``: nothing
    says it did not, as ``agent.executor_resizes.unclear_release`` reads a translated one)."""
    error = str(exc) or type(exc).__name__
    done.memory = _failing(resize.pool_id, error, now, now, pools, done.memory, done.alerts, resize.is_scale_up)
    unclear = not resize.is_scale_up
    done.results.append(
        ActionResult(resize.key, resize.pool_id, ActionStatus.FAILED, now, error=error, unclear=unclear)
    )


def clear_failed_units(
    states: Mapping[str, PoolState],
    actuator: Actuator,
    pools: Mapping[str, PoolSpec],
    memory: PlannerMemory,
    now: datetime,
) -> Execution:
    """Remove units the cloud accepted and then could not create (a stockout found after the request), and back
    their pool off, before this tick plans: the plan then already fills the next eligible pool. The removal is a
    resize to the pool's own target, which every actuator takes as "delete the failed units". Units whose provider
    says why each failed (``PoolState.failed_messages``), none for want of capacity or quota (a slice in error after
    a host failure, once its job was stopped), are removed the same way with no back-off and no stockout alert,
    until the pool's units have kept failing so for its lead time (``_units_failing``); where such units failed for an
    error confined to their zone (``ZoneState.failed_in_zone``), the zone backs off and the zone alert says which
    zones take the nodes."""
    results: list[ActionResult] = []
    alerts: list[AlertEvent] = []
    memory = _units_stopped_failing(memory, states, pools, now)
    for pool_id, state in sorted(states.items()):
        if state.failed_units <= 0 or pool_id not in pools or pool_id in memory.blocked:
            continue
        key = f"{pool_id}@{now.isoformat()}->clear-failed"
        refused = removed = False
        try:
            results.append(actuator.resize(pool_id, state.target_units, key))
            if results[-1].status in ACCEPTED:
                memory, removed = memory.not_failing(pool_id), True
        except CapacityUnavailable:
            refused = True  # the actuator refused for the same stockout: backing off below is the whole answer
        except TransientActuatorError as exc:
            results.append(ActionResult(key, pool_id, ActionStatus.FAILED, now, error=str(exc)))
            memory = _failing(pool_id, str(exc), now, now, pools, memory, alerts)
        except PermanentActuatorError as exc:
            results.append(ActionResult(key, pool_id, ActionStatus.FAILED, now, error=str(exc)))
            alerts.append(blocked_alert(pool_id, now, str(exc)))
            memory = memory.block(pool_id, str(exc))
            continue
        if not refused and not _failed_for_capacity(state):
            if removed:  # counted once: units whose removal failed are seen failed again at the next tick
                memory = _units_failing(state, now, pools[pool_id], memory, alerts)
            else:
                log.info("pool %s: %s; no back-off", pool_id, _failed_units(state))
            # A zone backed off for an error confined to it (a reservation used up) leaves the others its share.
            in_zone = removed and any(z.failed_in_zone for z in state.zones) and not memory.in_backoff(pool_id, now)
            if in_zone and (spare := _zones_with_room(state, now)):
                alerts.append(_zone_stockout_alert(state, spare, now))
            continue
        if memory.in_backoff(pool_id, now):
            continue
        if spare := _zones_with_room(state, now):
            alerts.append(_zone_stockout_alert(state, spare, now))
            continue  # the pool's other zones take the nodes; the pool backs off once none is left
        backoff = max(MIN_BACKOFF, pools[pool_id].lead_time)
        alerts.append(_stockout_alert(state, backoff, now))
        memory = memory.back_off(pool_id, now + backoff, BackoffReason.STOCKOUT)
    return Execution(tuple(results), memory, tuple(alerts))


def blocked_pool_alerts(memory: PlannerMemory, now: datetime) -> tuple[AlertEvent, ...]:
    """The critical alert of each pool blocked after a permanent error, raised again every tick for as long as the
    pool stays blocked (a notifier sends one per de-duplication window), and so also after a restart or a change of
    leader that read the block back from the stored memory; each says how to unblock the pool."""
    return tuple(blocked_alert(pool_id, now, why) for pool_id, why in sorted(memory.blocked.items()))


def unread_pool_alerts(actuator: Actuator, now: datetime) -> tuple[AlertEvent, ...]:
    """One alert per pool the actuator's latest ``list_pools`` could not read. Such a pool is held (the planner
    plans it as unobserved) and is not blocked: it is planned again as soon as it can be read. A permanent error
    (a refused permission, a resource not found) is critical, as a person must fix it; any other, a warning."""
    return tuple(
        AlertEvent(
            AlertKind.POOL_UNREADABLE,
            Severity.CRITICAL if isinstance(error, PermanentActuatorError) else Severity.WARNING,
            now,
            pool_id,
            f"State of {pool_id} could not be read; holding it until it can",
            {"error": str(error), "error_kind": type(error).__name__},
        )
        for pool_id, error in sorted(unread_pools(actuator).items())
    )


def _absorb(
    outcome: DrainOutcome,
    pools: Mapping[str, PoolSpec],
    memory: PlannerMemory,
    now: datetime,
    results: list[ActionResult],
    alerts: list[AlertEvent],
) -> PlannerMemory:
    results.extend(outcome.results)
    alerts.extend(outcome.alerts)  # a node removed with pods still terminating, told once
    for pool_id in sorted(outcome.finished):
        memory = memory.not_failing(pool_id)
    for pool_id, (since, error) in sorted(outcome.failing.items()):
        if pool_id not in outcome.permanent:
            memory = _failing(pool_id, error, since, now, pools, memory, alerts)
    for pool_id, error in outcome.permanent.items():
        alerts.append(blocked_alert(pool_id, now, error))
        memory = memory.block(pool_id, error)
    return memory
