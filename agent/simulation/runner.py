"""Running policies through the simulated cluster over a trace window, step by step.

At each step ``t`` the cluster first receives units whose lead time has passed, then the policy ticks (seeing
only demand before ``t``), then the step's demand is served by the ready units. A unit is paid from the moment
it is requested until it is released. Steps where any class's demand is missing (trace gaps) count neither
cost nor service: they are skipped in the metrics, never read as zero demand. What the agent-driven policies
observe is ``agent.simulation.observation``'s, what they run on ``agent.simulation.assembly``'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from actuators.simulated import SimulatedCluster, gap_lengths
from agent.outlook import Outlook
from agent.simulation.assembly import policy_agent, policy_cluster
from agent.simulation.bands import BandRecorder, BandSpec, band_leads
from agent.simulation.decisions import DecisionChanges, decision_changes
from agent.simulation.first_come import FirstComeCaps
from agent.simulation.observation import (
    COST_RANK,
    LAST_VALUE,
    ObserveArgs,
    Progress,
    observe_window,
    restart_parts,
    share_out,
)
from agent.simulation.oracle import oracle_schedule
from agent.simulation.policies import (
    AGENT_POLICIES,
    POLICIES,
    AgentController,
    Controller,
    OracleController,
    StaticController,
)
from agent.simulation.window import SimulationWindow, required_units
from agent.sources.trace import Trace
from config.schema import PlannerSettings, Settings
from forecasting.calibrated import last_value_forecaster
from models import AlertEvent, CapacityPlan, PoolKind, PoolSpec, SkipReason
from models.clock import SimulatedClock


@dataclass
class PolicyRun:
    """Outcome of one policy over the window: totals and the per-step series the report draws."""

    name: str
    cost_usd: float = 0.0
    accelerator_hours: float = 0.0
    demanded_accelerator_hours: float = 0.0
    served_accelerator_hours: float = 0.0
    unserved_accelerator_hours: float = 0.0
    scale_actions: int = 0
    spend_by_pool_usd: dict[str, float] = field(default_factory=dict)
    paid_units: dict[str, np.ndarray] = field(default_factory=dict)
    ready_units: dict[str, np.ndarray] = field(default_factory=dict)
    unserved_by_step: np.ndarray = field(default_factory=lambda: np.zeros(0))
    unserved_by_class: dict[str, np.ndarray] = field(default_factory=dict)  # chips left waiting; NaN on gaps
    served_by_pool: dict[str, np.ndarray] = field(default_factory=dict)  # chips served; NaN on gaps
    forecast_bands: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    alerts: list[AlertEvent] = field(default_factory=list)
    forced_release_units: int = 0  # units a budget's hard stop released (``commit_horizon``), busy ones included
    budget_held_steps: int = 0  # steps at which a budget cap held the run back (``held_by_budget``)

    @property
    def unserved_fraction(self) -> float:
        demanded = self.demanded_accelerator_hours
        return self.unserved_accelerator_hours / demanded if demanded > 0 else 0.0

    @property
    def utilization(self) -> float:
        paid = self.accelerator_hours
        return self.served_accelerator_hours / paid if paid > 0 else 0.0

    def summary(self) -> dict[str, object]:
        return {
            "cost_usd": round(self.cost_usd, 2),
            "accelerator_hours": round(self.accelerator_hours, 2),
            "unserved_fraction": self.unserved_fraction,
            "utilization": self.utilization,
            "scale_actions": self.scale_actions,
            "demanded_accelerator_hours": round(self.demanded_accelerator_hours, 2),
            "served_accelerator_hours": round(self.served_accelerator_hours, 2),
            "unserved_accelerator_hours": round(self.unserved_accelerator_hours, 4),
            "spend_by_pool_usd": {k: round(v, 2) for k, v in sorted(self.spend_by_pool_usd.items())},
            "alerts": len(self.alerts),
            "budget_held_steps": self.budget_held_steps,
        }


def simulate(
    settings: Settings,
    trace: Trace,
    window: SimulationWindow,
    policies: Sequence[str] = POLICIES,
    progress: Progress | None = None,
) -> dict[str, PolicyRun]:
    session = Simulation(settings, trace, window, progress=progress)
    return {name: session.run(name) for name in policies}


class Simulation:
    """Runs policies over one window. The agent-driven policies observe and forecast each tick only once per
    session: what a tick sees does not depend on what was done before, so every planner setting tried on the
    same window replays the same outlooks (``extra_quantiles`` lists forecast levels such sweeps need)."""

    def __init__(
        self,
        settings: Settings,
        trace: Trace,
        window: SimulationWindow,
        extra_quantiles: Sequence[float] = (),
        progress: Progress | None = None,
        outlooks: Mapping[str, list[Outlook]] | None = None,
    ) -> None:
        self.settings = settings
        self.trace = trace
        self.window = window
        self.extra_quantiles = tuple(extra_quantiles)
        self.progress = progress
        self._outlooks: dict[str, list[Outlook]] = dict(outlooks or {})  # per policy, computed elsewhere
        self._last_value: list[Outlook] | None = None

    def run(self, policy: str, planner: PlannerSettings | None = None, bands: bool = True) -> PolicyRun:
        """Run one policy; ``planner`` overrides the planner settings of the agent-driven policies; without
        ``bands`` the run keeps no forecast bands (``run_policy``)."""
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
        outlooks = self.outlooks(policy) if policy in AGENT_POLICIES else None
        return run_policy(self.settings, self.trace, self.window, policy, planner, outlooks=outlooks, bands=bands)

    def outlooks(self, policy: str) -> list[Outlook]:
        if policy not in self._outlooks:
            self._outlooks[policy] = observe_window(
                self.settings, self.trace, self.window, policy, self.extra_quantiles, self.progress
            )
        return self._outlooks[policy]

    def decision_changes(self) -> dict[str, DecisionChanges]:
        """Per demand group, how often the forecast policy's need differed from the calibrated last value's."""
        return decision_changes(
            self.settings, self.settings.planner, self.window, self.outlooks("forecast"), self._last_value_outlooks()
        )

    def _last_value_outlooks(self) -> list[Outlook]:
        if self._last_value is None:  # the planner's own levels only: the comparison is at its service levels
            self._last_value = observe_window(*self._job_args(LAST_VALUE))
        return self._last_value

    def _job_args(self, name: str, ticks: range | None = None, progress: Progress | None = None) -> ObserveArgs:
        """``observe_window``'s arguments for a policy's outlooks, or the calibrated last value's (``LAST_VALUE``)."""
        if name == LAST_VALUE:  # the planner's own levels only: the comparison is at its service levels
            return (self.settings, self.trace, self.window, "forecast", (), None, last_value_forecaster, ticks)
        return (self.settings, self.trace, self.window, name, self.extra_quantiles, progress, None, ticks)

    def prepare(self, policies: Sequence[str], compare_decisions: bool = False) -> None:
        """Compute the outlooks of the agent-driven ``policies`` (and, with ``compare_decisions``, the calibrated
        last value's that ``decision_changes`` compares the forecast with) on two cores: each is observed in the two
        parts the agents restart between (``restart_tick``), and the parts are shared out as they come free between
        this process, with progress, and a second one, fed by a thread here. Forecasts need no shared state, so this
        halves the wait."""
        names = [p for p in dict.fromkeys(policies) if p in AGENT_POLICIES and p not in self._outlooks]
        if compare_decisions and "forecast" in policies and self._last_value is None:
            names.append(LAST_VALUE)
        parts = restart_parts(self.settings, self.window)
        names.sort(key=lambda name: COST_RANK.get(name, 0))  # the longest first, so the two end close together
        jobs = [(name, ticks) for name in names for ticks in parts]
        if len(jobs) < 2:
            for name in names:
                self._store(name, [observe_window(*self._job_args(name, None, self.progress))])
            return
        found = share_out(jobs, self._job_args, self.progress)
        for name in names:
            self._store(name, [found[(name, ticks)] for ticks in parts])

    def _store(self, name: str, parts: Sequence[list[Outlook]]) -> None:
        joined = [outlook for part in parts for outlook in part]
        if name == LAST_VALUE:
            self._last_value = joined
        else:
            self._outlooks[name] = joined


def run_policy(
    settings: Settings,
    trace: Trace,
    window: SimulationWindow,
    policy: str,
    planner: PlannerSettings | None = None,
    progress: Progress | None = None,
    outlooks: Sequence[Outlook] | None = None,
    bands: bool = True,
) -> PolicyRun:
    """Run one policy. ``planner`` overrides the planner settings of the agent-driven policies; ``outlooks``
    (one per step) replays precomputed observations and forecasts instead of computing them. Without ``bands``
    the run keeps no forecast bands (``PolicyRun.forecast_bands`` empty): a search's trial, which no report
    draws."""
    pools = settings.pool_specs()
    cluster, clock = policy_cluster(settings, window, policy)
    controller: Controller
    caps = FirstComeCaps.paced(settings) if policy == "reactive" else None
    if policy == "static":
        controller = StaticController(cluster)
    elif policy == "oracle":
        required = required_units(window.demand, window.classes, pools, settings.waiting_costs())
        schedule = {p.pool_id: oracle_schedule(required[p.pool_id], p.lead_time, window.step) for p in pools}
        controller = OracleController(cluster, schedule)
    else:
        agent = policy_agent(policy, settings, trace, window, cluster, planner)
        controller = AgentController(agent, outlooks)
        spec = BandSpec(band_leads(pools, window.step), agent.service_levels) if bands else None
        return drive(policy, controller, cluster, clock, window, pools, progress, caps, spec)
    return drive(policy, controller, cluster, clock, window, pools, progress, caps)


def run_actual(settings: Settings, window: SimulationWindow, units: Mapping[str, np.ndarray]) -> PolicyRun:
    """What the pools really ran (``units[pool][t]``, recorded, e.g. node counts), billed and served like a
    policy. A recorded unit serves from the step it appears (a node is recorded once it has joined), neither
    clamped to the configured bounds nor interrupted; a unit the pool added is billed from its pool's lead time
    before it appears, as every policy's unit is billed from its request (``provisioning_units``), except on an
    on-prem pool, whose nodes are owned and whose return is not a purchase. A record
    missing for up to ``HELD_STEPS`` steps holds the last one (before the first: the first); a longer gap is for
    the caller to refuse where the window bills it (``unrecorded_steps``), and is held only at steps that are
    not billed (demand gaps)."""
    recorded = {pool_id: _held(values) for pool_id, values in units.items()}
    pools = [
        replace(
            p,
            lead_time=timedelta(0),
            min_units=0,
            max_units=max(p.max_units, int(recorded[p.pool_id].max(initial=0))),
            spot_interruption_per_hour=0.0,
        )
        for p in settings.pool_specs()
    ]
    clock = SimulatedClock(window.index[0].to_pydatetime())
    start = {p: int(v[0]) for p, v in recorded.items()}
    cluster = SimulatedCluster(pools, clock, start, waiting_costs=settings.waiting_costs())
    run = drive("actual", OracleController(cluster, recorded), cluster, clock, window, pools, None)
    hours = window.step.total_seconds() / 3600.0
    observed = window.observed
    for pool in settings.pool_specs():
        # An on-prem node that comes back (from maintenance, a repair) was not bought: it bills nothing before it
        # appears, as no policy bills one (and ``band_leads`` takes an on-prem pool's lead time as none).
        if pool.pool_id not in recorded or pool.kind is PoolKind.ON_PREM:
            continue
        extra = provisioning_units(recorded[pool.pool_id], pool.lead_time, window.step)
        run.paid_units[pool.pool_id] = run.paid_units[pool.pool_id] + extra
        billed = float(extra[observed].sum()) * hours  # billed as ``_drive`` bills: at steps with data
        run.spend_by_pool_usd[pool.pool_id] += billed * pool.price_per_unit_hour_usd
        run.cost_usd += billed * pool.price_per_unit_hour_usd
        run.accelerator_hours += billed * pool.chips_per_unit
    return run


def provisioning_units(recorded: np.ndarray, lead: timedelta, step: timedelta) -> np.ndarray:
    """Per step, the units of a pool requested and not yet recorded: each unit added at step ``t`` (the rise of
    ``recorded`` there; a unit removed and another added is a new request) is paid from its lead time before,
    ``ceil(lead / step)`` steps, as long as that is inside the window."""
    steps = math.ceil(lead / step) if lead > timedelta(0) else 0
    extra = np.zeros(len(recorded), dtype=int)
    if steps == 0 or len(recorded) < 2:
        return extra
    added = np.maximum(0, np.diff(np.asarray(recorded, dtype=int)))
    for t in np.flatnonzero(added):  # added[t] units appear at step t + 1
        extra[max(0, t + 1 - steps) : t + 1] += added[t]
    return extra


def run_schedule(
    settings: Settings, window: SimulationWindow, targets: Mapping[str, np.ndarray], start: Mapping[str, int]
) -> PolicyRun:
    """A schedule of requested units (``targets[pool][t]``, e.g. a dry-run daemon's recommendations) carried out
    on the simulated cluster from ``start`` units, ready at the start: clamped to the pools' bounds, paid from the
    request, ready after the lead time; spot units are not interrupted (a schedule cannot react to it)."""
    pools = [replace(p, spot_interruption_per_hour=0.0) for p in settings.pool_specs()]
    clock = SimulatedClock(window.index[0].to_pydatetime())
    cluster = SimulatedCluster(pools, clock, dict(start), waiting_costs=settings.waiting_costs())
    schedule = {pool_id: np.asarray(values, dtype=int) for pool_id, values in targets.items()}
    return drive("schedule", OracleController(cluster, schedule), cluster, clock, window, pools, None)


# A recorded capacity missing for this many steps or fewer is a missed scrape or a sample just outside the
# lookback, and the last record holds; a longer gap is no record: a capacity query that answers nothing while
# the pool has no nodes (count() over no series) leaves the pool's time at zero as such a gap, and holding the
# last value across it billed nodes that had been removed.
HELD_STEPS = 2


def unrecorded_steps(values: np.ndarray, billed: np.ndarray) -> np.ndarray:
    """Which of the ``billed`` steps (a mask) have no recorded value within ``HELD_STEPS`` steps after the last
    one (before the first: before the first one)."""
    missing: np.ndarray = np.isnan(_near(values).to_numpy(dtype=float)) & np.asarray(billed, dtype=bool)
    return missing


def _near(values: np.ndarray) -> pd.Series:
    series = pd.Series(values, dtype=float).ffill(limit=HELD_STEPS)
    return series.bfill(limit=HELD_STEPS, limit_area="outside")


def _held(values: np.ndarray) -> np.ndarray:
    """Whole units, gaps of up to ``HELD_STEPS`` filled by the last (before the first: the first) recorded
    value; longer ones, which ``unrecorded_steps`` leaves to steps that are not billed, too."""
    series = _near(values).ffill().bfill()
    if series.isna().all():
        raise ValueError("no recorded value")
    held: np.ndarray = np.rint(series.to_numpy(dtype=float)).astype(int)
    return held


def drive(
    policy: str,
    controller: Controller,
    cluster: SimulatedCluster,
    clock: SimulatedClock,
    window: SimulationWindow,
    pools: Sequence[PoolSpec],
    progress: Progress | None,
    caps: FirstComeCaps | None = None,
    band_spec: BandSpec | None = None,
) -> PolicyRun:
    steps = len(window.index)
    hours = window.step.total_seconds() / 3600.0
    observed = window.observed
    run = PolicyRun(name=policy, unserved_by_step=np.full(steps, np.nan))
    run.paid_units = {p.pool_id: np.zeros(steps, dtype=int) for p in pools}
    run.ready_units = {p.pool_id: np.zeros(steps, dtype=int) for p in pools}
    run.spend_by_pool_usd = {p.pool_id: 0.0 for p in pools}
    run.unserved_by_class = {name: np.full(steps, np.nan) for name in window.classes}
    run.served_by_pool = {p.pool_id: np.full(steps, np.nan) for p in pools}
    bands = BandRecorder(window, band_spec) if band_spec is not None else None
    times, totals = window.times, window.totals
    gaps = gap_lengths(observed)
    for t in range(steps):
        now: datetime = times[t]
        clock.set(now)
        cluster.advance(now)
        report = controller.tick(t, now)
        cluster.advance(now)
        cluster.interrupt_spot(window.step)
        held = caps is not None and caps.hold(now, cluster, hours) > 0
        if report is not None:
            held = held or held_by_budget(report.plan)
            if bands is not None:
                bands.record(t, report)
            run.alerts.extend(report.alerts)
            run.forced_release_units += sum(r.from_units - r.to_units for r in report.plan.resizes if r.forced)
        run.budget_held_steps += held
        paid, ready = cluster.paid_units(), cluster.ready_units()
        for pool in pools:
            run.paid_units[pool.pool_id][t] = paid[pool.pool_id]
            run.ready_units[pool.pool_id][t] = ready[pool.pool_id]
        if not observed[t]:
            # unknown demand: never read as idle; the classes with a value keep the units they take busy
            known = {name: chips for name, chips in window.at(t).items() if not math.isnan(chips)}
            cluster.pause_idle(window.step, window.step * int(gaps[t]), known)
            continue
        outcome = cluster.serve(now, window.at(t))
        for pool in pools:
            cost = paid[pool.pool_id] * pool.price_per_unit_hour_usd * hours
            run.spend_by_pool_usd[pool.pool_id] += cost
            run.cost_usd += cost
            run.accelerator_hours += paid[pool.pool_id] * pool.chips_per_unit * hours
        run.demanded_accelerator_hours += totals[t] * hours
        run.served_accelerator_hours += sum(outcome.served.values()) * hours
        run.unserved_by_step[t] = sum(outcome.unserved.values())
        run.unserved_accelerator_hours += run.unserved_by_step[t] * hours
        for name in window.classes:
            run.unserved_by_class[name][t] = outcome.unserved.get(name, 0.0)
        for pool in pools:
            run.served_by_pool[pool.pool_id][t] = outcome.served_by_pool.get(pool.pool_id, 0.0)
        if progress is not None and t % 64 == 63:
            progress(64)
    if progress is not None:
        progress(steps % 64)
    run.scale_actions = cluster.scale_actions
    run.forecast_bands = bands.result() if bands is not None else {}
    return run


def held_by_budget(plan: CapacityPlan) -> bool:
    """Whether a budget cap held this plan back: a pool's target cut or a scale-up trimmed by a cap, demand a
    budget paced on a forecast funded in part only, a release forced by a hard stop, or a pool held for a budget."""
    for decision in plan.decisions.values():
        if decision.budget_cuts:
            return True
        if any(s.unpaced_need is not None and s.unpaced_need > s.need + 1e-9 for s in decision.demand):
            return True
    return any(r.forced for r in plan.resizes) or any(skip.reason is SkipReason.BUDGET for skip in plan.skips)
