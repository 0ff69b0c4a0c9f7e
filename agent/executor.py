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

How both counts are kept, ended and told is in ``agent.executor_failures``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from actuators.base import Actuator, unread_pools
from agent.drains import DrainOutcome, NodeDrains
from agent.executor_failures import (
    MIN_BACKOFF,
    _failed_for_capacity,
    _failed_units,
    _failing,
    _stopped_failing,
    _units_failing,
    _units_stopped_failing,
    _zone_stockout_alert,
    _zones_with_room,
)
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
from models.durations import format_duration

__all__ = [
    "MIN_BACKOFF",
    "UNBLOCK",
    "Execution",
    "blocked_pool_alerts",
    "clear_failed_units",
    "execute",
    "unread_pool_alerts",
]

log = logging.getLogger(__name__)
UNBLOCK = (
    "fix the cause, then remove the pool from `blocked` in the planner memory (the ConfigMap named by "
    "daemon.state.config_map_name, leadtime-state by default, key planner-memory.json) or delete that ConfigMap; "
    "the leader reads it every tick"
)
_ACCEPTED = (ActionStatus.DONE, ActionStatus.STARTED, ActionStatus.RECORDED)


@dataclass(frozen=True)
class Execution:
    results: tuple[ActionResult, ...]
    memory: PlannerMemory
    alerts: tuple[AlertEvent, ...] = field(default_factory=tuple)


def execute(
    plan: CapacityPlan,
    actuator: Actuator,
    pools: dict[str, PoolSpec],
    memory: PlannerMemory,
    now: datetime,
    drains: NodeDrains | None = None,
) -> Execution:
    results: list[ActionResult] = []
    alerts: list[AlertEvent] = []
    if drains is not None:
        memory = _absorb(drains.continue_pending(now), pools, memory, now, results, alerts)
    if plan.is_empty:
        return Execution(tuple(results), _stopped_failing(memory, pools, now), tuple(alerts))
    cloud = {state.pool_id: state for state in actuator.list_pools()}
    unread = unread_pools(actuator)
    fresh = drains.adjusted(cloud) if drains is not None else cloud
    for resize in plan.resizes:
        if (why := memory.blocked.get(resize.pool_id)) is not None:
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
            outcome = drains.scale_down(resize, now, decision.nodes if decision is not None else ())
            if any(r.status in _ACCEPTED for r in outcome.results):
                memory = memory.changed(resize.pool_id, now, -1)
            memory = _absorb(outcome, pools, memory, now, results, alerts)
        else:
            taken: list[str] = []
            if drains is not None and drains.serves(resize.pool_id) and resize.is_scale_up:
                taken = drains.take_back(resize.pool_id, resize.to_units - resize.from_units, now)
            decision = plan.decisions.get(resize.pool_id)
            capped = decision is not None and bool(decision.budgets)
            sent = _Sent(cloud[resize.pool_id], state, taken, capped)
            memory = _resize(resize, sent, actuator, pools, memory, now, results, alerts)
        log.info(
            "action pool=%s from=%d to=%d status=%s reason=%r",
            resize.pool_id,
            resize.from_units,
            resize.to_units,
            results[-1].status,
            resize.reason,
        )
    return Execution(tuple(results), _stopped_failing(memory, pools, now), tuple(alerts))


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
    until the pool's units have kept failing so for its lead time (``_units_failing``)."""
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
            if results[-1].status in _ACCEPTED:
                memory, removed = memory.not_failing(pool_id), True
        except CapacityUnavailable:
            refused = True  # the actuator refused for the same stockout: backing off below is the whole answer
        except TransientActuatorError as exc:
            results.append(ActionResult(key, pool_id, ActionStatus.FAILED, now, error=str(exc)))
            memory = _failing(pool_id, str(exc), now, now, pools, memory, alerts)
        except PermanentActuatorError as exc:
            results.append(ActionResult(key, pool_id, ActionStatus.FAILED, now, error=str(exc)))
            alerts.append(_blocked_alert(pool_id, now, str(exc)))
            memory = memory.block(pool_id, str(exc))
            continue
        if not refused and not _failed_for_capacity(state):
            if removed:  # counted once: units whose removal failed are seen failed again at the next tick
                memory = _units_failing(state, now, pools[pool_id], memory, alerts)
            else:
                log.info("pool %s: %s; no back-off", pool_id, _failed_units(state))
            continue
        if memory.in_backoff(pool_id, now):
            continue
        if spare := _zones_with_room(state, now):
            alerts.append(_zone_stockout_alert(state, spare, now))
            continue  # the pool's other zones take the nodes; the pool backs off once none is left
        backoff = max(MIN_BACKOFF, pools[pool_id].lead_time)
        alerts.append(
            AlertEvent(
                AlertKind.STOCKOUT,
                Severity.WARNING,
                now,
                pool_id,
                f"{state.failed_units} units of {pool_id} failed after the request was accepted (no capacity, "
                f"suspended or in error); removed them, backing off {format_duration(backoff)} and using the next pool",
                {"failed_units": str(state.failed_units), "target_units": str(state.target_units)},
            )
        )
        memory = memory.back_off(pool_id, now + backoff, BackoffReason.STOCKOUT)
    return Execution(tuple(results), memory, tuple(alerts))


def blocked_pool_alerts(memory: PlannerMemory, now: datetime) -> tuple[AlertEvent, ...]:
    """The critical alert of each pool blocked after a permanent error, raised again every tick for as long as the
    pool stays blocked (a notifier sends one per de-duplication window), and so also after a restart or a change of
    leader that read the block back from the stored memory; each says how to unblock the pool."""
    return tuple(_blocked_alert(pool_id, now, why) for pool_id, why in sorted(memory.blocked.items()))


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


@dataclass(frozen=True)
class _Sent:
    """What a resize is sent against: the cloud's own target (``cloud``), the pool the plan saw (``planned``: its
    draining nodes taken out), the draining nodes taken back for a scale-up (``taken``: they serve again) and
    whether a budget's cap priced the resize (``capped``: the pool is in a budget)."""

    cloud: PoolState
    planned: PoolState
    taken: Sequence[str] = ()
    capped: bool = False


def _resize(
    resize: Resize,
    sent: _Sent,
    actuator: Actuator,
    pools: dict[str, PoolSpec],
    memory: PlannerMemory,
    now: datetime,
    results: list[ActionResult],
    alerts: list[AlertEvent],
) -> PlannerMemory:
    """``_send`` the resize, and name on its result the draining nodes it took back: their drains ended whatever
    the cloud answered (they were uncordoned before the resize was sent)."""
    before = len(results)
    memory = _send(resize, sent, actuator, pools, memory, now, results, alerts)
    if sent.taken:
        results[before:] = [replace(r, taken_back=tuple(sent.taken)) for r in results[before:]]
    return memory


def _send(
    resize: Resize,
    sent: _Sent,
    actuator: Actuator,
    pools: dict[str, PoolSpec],
    memory: PlannerMemory,
    now: datetime,
    results: list[ActionResult],
    alerts: list[AlertEvent],
) -> PlannerMemory:
    """Carry out the planned change against the cloud's own target (``sent.cloud``): the plan was made on
    ``sent.planned``, the pool with its nodes still draining taken out, while the cloud's target still counts them
    until each drain removes its node. Sending the planned figure as it is would make the actuator shrink the pool by
    the draining nodes, deleting instances of the cloud's choosing with no drain; sent as the same change applied to
    the cloud's target, a resize can never take out a node the drainer did not empty. The draining nodes taken back
    for a scale-up (``sent.taken``) serve again and are in that target already: only the rest is bought, and of it
    of a pool in a budget no more than the plan counted as new (``_held_for_take_back``), so the budget's cap holds
    when a take-back fails; a pool in no budget buys the rest at once, as no cap priced it.

    The cloud's target never goes above the pool's ``max_units``: a scale-up that would (the draining nodes still
    count there) buys what fits and the rest waits for the drains to finish, when the next plan buys it on the
    target they leave; with no room at all it is rejected, so nothing is sent (an AWS group at its maximum size
    would read it as a stockout, a GKE pool would grow past ``max_units``)."""
    cloud, taken = sent.cloud, sent.taken
    to_units = cloud.target_units + resize.to_units - resize.from_units - len(taken)
    draining = cloud.target_units - sent.planned.target_units - len(taken)
    spec = pools.get(resize.pool_id)
    notes = [f"took back {len(taken)} draining units ({', '.join(taken)}): uncordoned, they serve at once"] * bool(
        taken
    )
    if held := _held_for_take_back(resize, sent):
        to_units -= held
        notes.append(
            f"took back {len(taken)} of the {sent.planned.takeable_units} draining units the plan counted on (their "
            f"drains go on): {held} of the planned {resize.to_units - resize.from_units} units wait for a later plan "
            "(the plan counted them as served by those nodes, not bought)"
        )
    waiting = _waiting_for_drains(resize, cloud, spec, len(taken) + held)
    if waiting and spec is not None:
        to_units -= waiting
        notes.append(
            f"{resize.pool_id} holds {cloud.target_units} units with {draining} still draining and its max_units is "
            f"{spec.max_units}: {waiting} of the planned {resize.to_units - resize.from_units} units wait for those "
            "drains to finish (a later plan buys them)"
        )
    detail = "; ".join(notes)
    if notes:
        log.info("pool %s: %s", resize.pool_id, detail)
    if resize.is_scale_up and to_units <= cloud.target_units:  # nothing to buy now
        status = ActionStatus.DONE if taken else ActionStatus.REJECTED
        results.append(ActionResult(resize.key, resize.pool_id, status, now, detail))
        return memory.changed(resize.pool_id, now, +1) if taken else memory
    if to_units != resize.to_units:
        log.info(
            "pool %s: %d nodes still draining; its target goes %d -> %d for the planned %d -> %d",
            resize.pool_id, draining, cloud.target_units, to_units, resize.from_units, resize.to_units,
        )  # fmt: skip
    try:
        result = actuator.resize(resize.pool_id, to_units, resize.key)
    except CapacityUnavailable as exc:
        backoff = max(MIN_BACKOFF, pools[resize.pool_id].lead_time)
        results.append(ActionResult(resize.key, resize.pool_id, ActionStatus.FAILED, now, error=str(exc)))
        alerts.append(
            AlertEvent(
                AlertKind.STOCKOUT,
                Severity.WARNING,
                now,
                resize.pool_id,
                f"No capacity for {resize.pool_id}; backing off {format_duration(backoff)} and using the next pool",
                {"error": str(exc), "wanted_units": str(resize.to_units)},
            )
        )
        return memory.back_off(resize.pool_id, now + backoff, BackoffReason.STOCKOUT)
    except TransientActuatorError as exc:
        results.append(ActionResult(resize.key, resize.pool_id, ActionStatus.FAILED, now, error=str(exc)))
        return _failing(resize.pool_id, str(exc), now, now, pools, memory, alerts, scale_up=resize.is_scale_up)
    except PermanentActuatorError as exc:
        results.append(ActionResult(resize.key, resize.pool_id, ActionStatus.FAILED, now, error=str(exc)))
        alerts.append(_blocked_alert(resize.pool_id, now, str(exc)))
        return memory.block(resize.pool_id, str(exc))
    if notes:
        result = replace(result, detail=f"{result.detail}; {detail}" if result.detail else detail)
    results.append(result)
    if result.status in _ACCEPTED:
        return memory.not_failing(resize.pool_id).changed(resize.pool_id, now, +1 if resize.is_scale_up else -1)
    return memory


def _held_for_take_back(resize: Resize, sent: _Sent) -> int:
    """How many of a scale-up's units not taken back are not bought now: the plan's budget counted the idle
    draining nodes (``takeable_units``) as served again, not bought, so when fewer drains could be ended only the
    units beyond them are new (0 for any other resize); the next plan counts the rest against the nodes it sees. A
    pool in no budget (``sent.capped`` false) holds nothing back: no cap counted on those nodes, and holding units
    back would only leave its demand waiting for drains that go on."""
    if not resize.is_scale_up or not sent.capped:
        return 0
    planned = resize.to_units - resize.from_units
    return max(0, planned - len(sent.taken) - max(0, planned - sent.planned.takeable_units))


def _waiting_for_drains(resize: Resize, cloud: PoolState, spec: PoolSpec | None, taken: int) -> int:
    """How many of a scale-up's planned units, less the draining nodes taken back, do not fit under the pool's
    ``max_units`` while draining nodes still count in the cloud's target (0 for any other resize)."""
    if not resize.is_scale_up or spec is None:
        return 0
    room = max(0, spec.max_units - cloud.target_units)
    return max(0, resize.to_units - resize.from_units - taken - room)


def _absorb(
    outcome: DrainOutcome,
    pools: Mapping[str, PoolSpec],
    memory: PlannerMemory,
    now: datetime,
    results: list[ActionResult],
    alerts: list[AlertEvent],
) -> PlannerMemory:
    results.extend(outcome.results)
    for pool_id in sorted(outcome.finished):
        memory = memory.not_failing(pool_id)
    for pool_id, (since, error) in sorted(outcome.failing.items()):
        if pool_id not in outcome.permanent:
            memory = _failing(pool_id, error, since, now, pools, memory, alerts)
    for pool_id, error in outcome.permanent.items():
        alerts.append(_blocked_alert(pool_id, now, error))
        memory = memory.block(pool_id, error)
    return memory


def _blocked_alert(pool_id: str, now: datetime, error: str) -> AlertEvent:
    return AlertEvent(
        AlertKind.ACTUATOR_FAILURE,
        Severity.CRITICAL,
        now,
        pool_id,
        f"Stopped touching {pool_id} after a permanent error; nothing is sent to it until it is unblocked: {UNBLOCK}",
        {"error": error},
    )
