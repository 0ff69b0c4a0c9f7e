"""The recommendation document ``leadtime recommend`` writes (``agent.commands.recommend``), built from one dry-run
tick: per pool the current and recommended units with the reason and the plan's arithmetic, what they cost per day
and what would be released once seen idle; per class and per group of classes planned together the forecast bands and
the peak the planner sizes on; and the backtest of the configured forecaster over the history read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from agent.commands.recommend_warnings import onprem_held
from agent.forecast_quality import backtest, quality_table
from agent.loop import Agent, TickReport
from agent.observation import with_group_series
from agent.onprem_capacity import OnPremReading
from agent.planning.budget import billed_after, draining_going
from agent.planning.groups import DemandGroup
from agent.planning.service_level import DEFAULT_SERVICE_LEVEL
from forecasting.factory import build_forecaster
from models import (
    AlertEvent,
    DemandForecast,
    MetricsUnavailable,
    PoolDecision,
    PoolKind,
    PoolSpec,
    PoolState,
    SkipReason,
    ZoneState,
)
from models.redaction import redact_tree

BACKTEST_SPAN = timedelta(days=1)
BACKTEST_EVERY = timedelta(hours=1)


def recommendation_document(
    config_path: str,
    at: datetime,
    agent: Agent,
    tick: TickReport,
    states: Mapping[str, PoolState],
    pool_state_source: str,
    url: str,
    onprem: OnPremReading | None = None,
    read_alerts: Sequence[AlertEvent] = (),
) -> dict[str, Any]:
    """The document of one dry-run tick planned on ``states``. ``onprem``: what the on-prem pools' capacity queries
    read for the tick; ``read_alerts``: what the daemon would alert on in the pools' nodes as they were read
    (``agent.commands.recommend_drains``), which the tick's own alerts leave out."""
    onprem = onprem or OnPremReading()
    resizes = {r.pool_id: r for r in tick.plan.resizes}
    skips = {s.pool_id: s for s in tick.plan.skips}
    pools: list[dict[str, Any]] = []
    for spec in agent.pools:
        state = states.get(spec.pool_id)
        # an on-prem pool no cloud reads is never resized: it is counted whole, at its max_units (``onprem_held``)
        fixed = spec.max_units if state is None and spec.kind is PoolKind.ON_PREM else None
        current = state.target_units if state is not None else fixed
        resize = resizes.get(spec.pool_id)
        decision = tick.plan.decisions.get(spec.pool_id)
        recommended = resize.to_units if resize else current
        if resize:
            action, reason = ("scale-up" if resize.is_scale_up else "scale-down"), resize.reason
        elif spec.pool_id in skips:
            action, reason = "hold", f"{skips[spec.pool_id].reason}: {skips[spec.pool_id].detail}"
        elif fixed is not None:
            action, reason = "keep", onprem_held(agent, spec)
        else:
            action, reason = "keep", "already at the planned target"
        price = spec.price_per_unit_hour_usd
        idle_release = releasable_once_idle(spec, current, decision)
        # money counts the units billed (a broken slice is, a queued resource waiting for resources is not), as the
        # budgets and the ledger do; sizes count the pool's target
        billed = state.billed_units if state is not None else fixed
        billed_then = billed_after(state, recommended) if state is not None and recommended is not None else fixed
        # nodes being drained are billed until their drains delete them, one more tick as the budgets count them:
        # a day's cost leaves them out (a scale-up that takes some back keeps those)
        draining = state.draining_units if state is not None else None
        draining_then = draining_going(state, recommended) if state is not None and recommended is not None else None
        why = decision.why() if decision is not None else reason
        if fixed is not None and decision is not None and decision.target_units is None:
            # the plan sets no target for a pool it never resizes: say what the row counts it at instead
            why = why.removesuffix("target unknown") + onprem_held(agent, spec)
        pools.append(
            {
                "pool_id": spec.pool_id,
                "kind": str(spec.kind),
                "tier": str(spec.tier),
                "chips_per_unit": spec.chips_per_unit,
                "lead_time_s": int(spec.lead_time.total_seconds()),
                "price_per_unit_hour_usd": price,
                "current_units": current,
                "billed_units": billed,
                "recommended_billed_units": billed_then,
                "draining_units": draining,
                "recommended_draining_units": draining_then,
                "ready_units": _ready_units(spec, state, onprem),
                "failed_units": state.failed_units if state is not None else None,
                "recommended_units": recommended,
                "planned_target_units": tick.plan.targets.get(spec.pool_id),
                "action": action,
                "reason": reason,
                "why": why,
                "decision": decision.stages() if decision is not None else None,
                "current_cost_per_day_usd": _per_day(staying(billed, draining), price),
                "recommended_cost_per_day_usd": _per_day(staying(billed_then, draining_then), price),
                "releasable_once_idle_units": idle_release,
                "releasable_once_idle_per_day_usd": _per_day(idle_release, price),
                "zones": [_zone_entry(z) for z in state.zones] if state is not None else [],
            }
        )
    current_day = sum(p["current_cost_per_day_usd"] or 0.0 for p in pools)
    recommended_day = sum(p["recommended_cost_per_day_usd"] or 0.0 for p in pools)
    return {
        "at": at.isoformat(),
        "config": config_path,
        "prometheus": url,
        "pool_state_source": pool_state_source,
        "step_s": int(agent.step.total_seconds()),
        "pools": pools,
        "classes": [_class_entry(agent, tick, c.name) for c in agent.classes],
        "groups": [_group_entry(agent, tick, g) for g in agent.groups if g.is_aggregate],
        "cost": {
            "current_per_day_usd": round(current_day, 2),
            "recommended_per_day_usd": round(recommended_day, 2),
            "change_per_day_usd": round(recommended_day - current_day, 2),
            "releasable_once_idle_per_day_usd": round(
                sum(p["releasable_once_idle_per_day_usd"] or 0.0 for p in pools), 2
            ),
        },
        "problems": dict(sorted(tick.problems.items())),
        "alerts": [_alert_entry(a) for a in (*read_alerts, *tick.alerts)],
    }


def _alert_entry(alert: AlertEvent) -> dict[str, Any]:
    """An alert as the daemon would raise it: its subject names what it is about (a pool, a node, a budget), which
    its summary may not (two pools whose idle nodes cannot be read raise the same summary), and its details say the
    error and what to do. Redacted here already (``recommend`` redacts the whole document too): an error the
    details quote may hold a credential."""
    entry = {"kind": str(alert.kind), "subject": alert.subject, "summary": alert.summary, "details": alert.details}
    return redact_tree(entry)


def _ready_units(spec: PoolSpec, state: PoolState | None, onprem: OnPremReading) -> int | None:
    """The units of the pool that can take work, as the tick planned on them. An on-prem pool with a capacity query
    is planned on what the query read (``agent.onprem_capacity``), not on its state: its reading, and none when the
    read failed (it is then planned on its ``max_units``, as the tick's alert says)."""
    if spec.kind is PoolKind.ON_PREM:
        if spec.pool_id in onprem.units:
            return onprem.units[spec.pool_id]
        if spec.pool_id in onprem.problems:
            return None
    return state.ready_units if state is not None else None


def staying(billed: int | None, draining: int | None) -> int | None:
    """Of ``billed`` units, those billed beyond the next tick: all but the nodes being drained (``draining``)."""
    return None if billed is None else billed - (draining or 0)


def releasable_once_idle(spec: PoolSpec, current: int | None, decision: PoolDecision | None) -> int:
    """Units the forecast would let go once they are seen idle for the idle hold: a pool that shrinks only by
    releasing idle units is held while none has been idle that long, which one instant cannot see. Not queued
    resources: the daemon never releases them for idleness (their TPU VMs are not nodes it can watch)."""
    if decision is None or current is None or spec.kind is PoolKind.TPU_QUEUED_RESOURCE:
        return 0
    if not any(hold.reason in (SkipReason.NOT_IDLE, SkipReason.STABILIZING) for hold in decision.holds):
        return 0
    return max(0, current - decision.bounded_units)


def _zone_entry(zone: ZoneState) -> dict[str, Any]:
    until = zone.backoff_until.isoformat() if zone.backoff_until is not None else None
    return {
        "zone": zone.zone,
        "ready_units": zone.ready_units,
        "target_units": zone.target_units,
        "failed_units": zone.failed_units,
        "backoff_until": until,
    }


def _class_entry(agent: Agent, tick: TickReport, name: str) -> dict[str, Any]:
    forecast = tick.forecasts.get(name)
    # the wait for capacity: an on-prem pool is never resized, so its lead_time is none (as ``_peak_steps``)
    leads = [p.lead_time for p in agent.pools if name in p.serves and p.kind is not PoolKind.ON_PREM]
    entry: dict[str, Any] = {
        "name": name,
        "observed": tick.observed.get(name),
        "service_level": agent.service_levels.get(name),
        "lead_time_s": int(max(leads).total_seconds()) if leads else None,
        "problem": tick.problems.get(name),
        "model": None,
        "forecast": None,
    }
    if forecast is not None:
        entry["model"] = forecast.model + (f" ({forecast.note})" if forecast.note else "")
        group = next((g for g in agent.groups if name in g.members), None)
        entry["forecast"] = _forecast_entry(forecast, None if group is None else _peak_steps(agent, group))
    return entry


def _group_entry(agent: Agent, tick: TickReport, group: DemandGroup) -> dict[str, Any]:
    """A group of classes served by the same pools, planned on the forecast of their summed demand."""
    forecast = tick.forecasts.get(group.name)
    return {
        "name": group.name,
        "members": list(group.members),
        "pools": sorted(group.pools),
        "service_level": _group_level(agent, group),
        "forecast": None if forecast is None else _forecast_entry(forecast, _peak_steps(agent, group)),
    }


def _group_level(agent: Agent, group: DemandGroup) -> float:
    """The service level the planner sizes a group on: the highest of its members' (``agent.planning.planner``)."""
    levels = [agent.service_levels.get(n, DEFAULT_SERVICE_LEVEL) for n in group.members]
    return agent.service_levels.get(group.name) or max(levels)


def _forecast_entry(forecast: DemandForecast, steps: int | None) -> dict[str, Any]:
    """The forecast bands step by step; ``peak``, per level, the quantile of the highest demand over the steps the
    planner looks at (``peak_steps``), which is what it plans on; ``per_step_max`` the highest one-step quantile,
    which a path's peak is at least."""
    shown = steps if steps is not None else forecast.horizon_steps
    return {
        "issued_at": forecast.issued_at.isoformat(),
        "step_s": int(forecast.step.total_seconds()),
        "quantiles": {f"{level:g}": [round(v, 3) for v in values] for level, values in forecast.quantiles.items()},
        "peak_steps": shown,
        "peak": {f"{level:g}": round(forecast.peak(level, steps), 3) for level in forecast.quantiles},
        "per_step_max": {
            f"{level:g}": round(max(values[:shown], default=forecast.last_observed), 3)
            for level, values in forecast.quantiles.items()
        },
    }


def _peak_steps(agent: Agent, group: DemandGroup) -> int | None:
    """The forecast steps the planner takes a demand's peak over: the longest lead time of the scalable pools that
    serve it, plus one tick (``agent.planning.planner``); all of them when only fixed pools serve it."""
    leads = [p.lead_time for p in agent.pools if p.pool_id in group.pools and p.kind is not PoolKind.ON_PREM]
    if not leads:
        return None
    return max(1, math.ceil((max(leads) + agent.tick) / agent.step))


def backtest_entry(agent: Agent, history: pd.DataFrame, at: datetime, problem: str | None) -> dict[str, Any]:
    """The configured model backtested as the daemon runs it: fitted and scored on each class's own series and on
    the summed series of each group of classes planned together (``with_group_series``), which is what the planner
    sizes those classes' pools on. ``groups`` scores that summed forecast at the group's service level and peak
    steps; ``classes`` scores each class's own forecast, and ``planned_on`` names the series its pools are sized on
    (the class itself when no other class may use exactly the same pools)."""
    first_origin = at - BACKTEST_SPAN - agent.horizon * agent.step
    forecaster = build_forecaster(agent.settings.forecast, agent.settings.planning_horizon())
    aggregates = [g for g in agent.groups if g.is_aggregate]
    levels = {**agent.service_levels, **{g.name: _group_level(agent, g) for g in aggregates}}
    peak_steps = {
        name: steps
        for group in agent.groups
        if (steps := _peak_steps(agent, group)) is not None
        for name in (*group.members, group.name)
    }
    try:
        results = backtest(
            forecaster,
            with_group_series(history, agent.groups),
            agent.step,
            agent.horizon,
            levels,
            first_origin,
            BACKTEST_EVERY,
            peak_steps=peak_steps,
        )
    except MetricsUnavailable as exc:
        results, problem = {}, str(exc)
    planned_on = {name: group.name for group in agent.groups for name in group.members}
    classes = quality_table(results, [c.name for c in agent.classes])
    return {
        "model": forecaster.name,
        "span_s": int(BACKTEST_SPAN.total_seconds()),
        "every_s": int(BACKTEST_EVERY.total_seconds()),
        "horizon_steps": agent.horizon,
        "classes": [{**row, "planned_on": planned_on[str(row["demand_class"])]} for row in classes],
        "groups": [
            {"demand_group": g.name, "members": list(g.members), **results[g.name].summary()}
            for g in aggregates
            if g.name in results
        ],
        "problem": problem,
    }


def _per_day(units: int | None, price: float) -> float | None:
    return None if units is None or math.isnan(price) else round(units * price * 24.0, 2)
