"""Sending one planned resize to a pool's actuator (``send_resize``), as ``agent.executor`` carries out a plan: the
planned change applied to the cloud's own target (which still counts the nodes being drained), the draining nodes a
scale-up took back not bought again, and of a pool in a budget no more than the plan counted as new
(``held_for_take_back``), never above the pool's ``max_units`` (``_waiting_for_drains``); and the actuator's answer
translated: a stockout backs the pool off (a quota used up told as such, with what to do: ``refused_alert``), a
failure a retry may fix is counted (``agent.executor_failures``), a permanent error blocks the pool; a release that
failed may have been carried out all the same (``unclear_release``). The log lines keep the executor's logger's
name, as they did before this moved here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from actuators.base import Actuator
from actuators.write_window import Writes, writes_sent
from agent.executor_failures import MIN_BACKOFF, QUOTA_ADVICE, _failing, blocked_alert
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from models import (
    ActionResult,
    ActionStatus,
    ActuatorError,
    AlertEvent,
    AlertKind,
    CapacityUnavailable,
    PermanentActuatorError,
    PoolSpec,
    PoolState,
    Resize,
    Severity,
    TransientActuatorError,
)
from models.durations import format_duration

log = logging.getLogger("agent.executor")
ACCEPTED = (ActionStatus.DONE, ActionStatus.STARTED, ActionStatus.RECORDED)  # a change the actuator took


@dataclass(frozen=True)
class Sent:
    """What a resize is sent against: the cloud's own target (``cloud``), the pool the plan saw (``planned``: its
    draining nodes taken out), the draining nodes taken back for a scale-up (``taken``: they serve again) and
    whether a budget's cap priced the resize (``capped``: the pool is in a budget)."""

    cloud: PoolState
    planned: PoolState
    taken: Sequence[str] = ()
    capped: bool = False


def send_resize(
    resize: Resize,
    sent: Sent,
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
    sent: Sent,
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
    of a pool in a budget no more than the plan counted as new (``held_for_take_back``), so the budget's cap holds
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
    if held := held_for_take_back(resize, sent):
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
        with writes_sent() as writes:
            result = actuator.resize(resize.pool_id, to_units, resize.key)
    except CapacityUnavailable as exc:
        backoff = max(MIN_BACKOFF, pools[resize.pool_id].lead_time)
        unclear = unclear_release(resize, exc, writes)
        results.append(
            ActionResult(resize.key, resize.pool_id, ActionStatus.FAILED, now, error=str(exc), unclear=unclear)
        )
        alerts.append(refused_alert(resize, exc, backoff, now))
        return memory.back_off(resize.pool_id, now + backoff, BackoffReason.STOCKOUT)
    except TransientActuatorError as exc:
        memory = _failing(resize.pool_id, str(exc), now, now, pools, memory, alerts, scale_up=resize.is_scale_up)
        unclear = unclear_release(resize, exc, writes)
        failed = ActionResult(resize.key, resize.pool_id, ActionStatus.FAILED, now, error=str(exc), unclear=unclear)
        results.append(failed)
        return memory
    except PermanentActuatorError as exc:
        unclear = unclear_release(resize, exc, writes)
        results.append(
            ActionResult(resize.key, resize.pool_id, ActionStatus.FAILED, now, error=str(exc), unclear=unclear)
        )
        alerts.append(blocked_alert(resize.pool_id, now, str(exc)))
        return memory.block(resize.pool_id, str(exc))
    if notes:
        result = replace(result, detail=f"{result.detail}; {detail}" if result.detail else detail)
    results.append(result)
    if result.status in ACCEPTED:
        return memory.not_failing(resize.pool_id).changed(resize.pool_id, now, +1 if resize.is_scale_up else -1)
    return memory


def unclear_release(resize: Resize, exc: ActuatorError, writes: Writes) -> bool:
    """Whether a release that failed with ``exc`` may still have been carried out, judged by its own calls
    (``Writes.maybe_applied``): a write of the change was accepted (its call returned) before ``exc`` was raised,
    whatever ``exc`` is (a later write refused, the look at the operation the write started rate limited or refused),
    or the adapter says the failed request itself may have reached the cloud (``maybe_applied``: no answer in time,
    the connection lost once it was sent, the server failing while it handled it). Such a release counts as sent
    (``ActionResult.unclear``: its claim and mark stay, and the other agents sharing its budget do not shed for its
    units too; ``agent.budget_watch`` bounds how long). A refusal of its only write, or of its first (a rate limit,
    another operation running, a write not sent; its call's error or the one the operation it started was read done
    with, ``actuators.write_window.write_refused``), is not: its claim is taken back at once, and the others shed for
    its units. Only a release is judged so."""
    return not resize.is_scale_up and writes.maybe_applied(exc)


def refused_alert(resize: Resize, exc: CapacityUnavailable, backoff: timedelta, now: datetime) -> AlertEvent:
    """The stockout alert of a change the provider refused for capacity or quota. A quota used up, as the adapter read
    it (``CapacityUnavailable.quota``), does not clear while the pool backs off: the alert says so and what to do
    (``QUOTA_ADVICE``), in its summary and its ``action`` detail."""
    what = "Quota used up" if exc.quota else "No capacity"
    summary = f"{what} for {resize.pool_id}; backing off {format_duration(backoff)} and using the next pool"
    details = {"error": str(exc), "wanted_units": str(resize.to_units)}
    if exc.quota:
        summary += f". {QUOTA_ADVICE}"
        details["action"] = QUOTA_ADVICE
    return AlertEvent(AlertKind.STOCKOUT, Severity.WARNING, now, resize.pool_id, summary, details)


def held_for_take_back(resize: Resize, sent: Sent) -> int:
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
