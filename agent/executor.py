"""Carrying out a plan: re-validate each action on freshly observed state, then act, translating outcomes.

Only this module calls an actuator's write methods. Outcomes update the planner's memory: a stockout backs the
pool off (the next plan fills the next eligible pool), a permanent error blocks the pool until a person looks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from actuators.base import Actuator
from agent.planning import PlannerMemory
from models import (
    ActionResult,
    ActionStatus,
    AlertEvent,
    AlertKind,
    CapacityPlan,
    CapacityUnavailable,
    PermanentActuatorError,
    PoolSpec,
    Severity,
    TransientActuatorError,
)

log = logging.getLogger(__name__)
MIN_BACKOFF = timedelta(minutes=10)


@dataclass(frozen=True)
class Execution:
    results: tuple[ActionResult, ...]
    memory: PlannerMemory
    alerts: tuple[AlertEvent, ...] = field(default_factory=tuple)


def execute(
    plan: CapacityPlan, actuator: Actuator, pools: dict[str, PoolSpec], memory: PlannerMemory, now: datetime
) -> Execution:
    if plan.is_empty:
        return Execution((), memory)
    fresh = {state.pool_id: state for state in actuator.list_pools()}
    results: list[ActionResult] = []
    alerts: list[AlertEvent] = []
    for resize in plan.resizes:
        state = fresh.get(resize.pool_id)
        if state is None or state.target_units != resize.from_units:
            seen = "gone" if state is None else f"{state.target_units} units"
            detail = f"planned from {resize.from_units} units but the pool is now {seen}; re-planning next tick"
            results.append(ActionResult(resize.key, resize.pool_id, ActionStatus.REJECTED, now, detail))
            continue
        try:
            result = actuator.resize(resize.pool_id, resize.to_units, resize.key)
        except CapacityUnavailable as exc:
            backoff = max(MIN_BACKOFF, pools[resize.pool_id].lead_time)
            memory = memory.back_off(resize.pool_id, now + backoff)
            results.append(ActionResult(resize.key, resize.pool_id, ActionStatus.FAILED, now, error=str(exc)))
            alerts.append(
                AlertEvent(
                    AlertKind.STOCKOUT,
                    Severity.WARNING,
                    now,
                    resize.pool_id,
                    f"No capacity for {resize.pool_id}; backing off {backoff} and using the next pool",
                    {"error": str(exc), "wanted_units": str(resize.to_units)},
                )
            )
        except TransientActuatorError as exc:
            results.append(ActionResult(resize.key, resize.pool_id, ActionStatus.FAILED, now, error=str(exc)))
        except PermanentActuatorError as exc:
            memory = memory.block(resize.pool_id, str(exc))
            results.append(ActionResult(resize.key, resize.pool_id, ActionStatus.FAILED, now, error=str(exc)))
            alerts.append(
                AlertEvent(
                    AlertKind.ACTUATOR_FAILURE,
                    Severity.CRITICAL,
                    now,
                    resize.pool_id,
                    f"Stopped touching {resize.pool_id} after a permanent error",
                    {"error": str(exc)},
                )
            )
        else:
            if result.status in (ActionStatus.DONE, ActionStatus.STARTED, ActionStatus.RECORDED):
                memory = memory.changed(resize.pool_id, now, +1 if resize.is_scale_up else -1)
            results.append(result)
        log.info(
            "action pool=%s from=%d to=%d status=%s reason=%r",
            resize.pool_id,
            resize.from_units,
            resize.to_units,
            results[-1].status,
            resize.reason,
        )
    return Execution(tuple(results), memory, tuple(alerts))
