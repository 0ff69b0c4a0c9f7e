"""What a policy runs on in the simulator: the simulated cluster (its starting units, its configured stockouts)
and the agent (its forecaster, its ledger, the reactive policy's planner settings and budgets)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from actuators.simulated import SimulatedCluster
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.planning.budget import Budget
from agent.simulation.policies import REACTIVE_UNNEEDED_TIME
from agent.simulation.window import SimulationWindow, initial_units, static_units
from agent.sources.trace import Trace, TraceSource
from config.schema import PlannerSettings, Settings
from forecasting.base import Forecaster
from forecasting.factory import build_forecaster
from forecasting.last_value import PersistenceForecaster
from models import LedgerEntry
from models.clock import SimulatedClock


def policy_cluster(
    settings: Settings, window: SimulationWindow, policy: str
) -> tuple[SimulatedCluster, SimulatedClock]:
    """The simulated cluster ``policy`` starts on, at the window's start, with the configured stockouts."""
    pools, priority = settings.pool_specs(), settings.waiting_costs()
    clock = SimulatedClock(window.index[0].to_pydatetime())
    start_units = (
        static_units(window, pools, priority) if policy == "static" else initial_units(window, pools, priority)
    )
    # a gap in the demand no longer than ``forecast.max_staleness`` (the agent plans on through it) pauses the idle
    # clocks, a longer one clears them
    cluster = SimulatedCluster(
        pools,
        clock,
        start_units,
        _stockouts(settings),
        waiting_costs=priority,
        idle_pause_limit=settings.forecast.max_staleness,
    )
    return cluster, clock


def without_paced_budgets(settings: Settings) -> Settings:
    """The settings a reactive autoscaler runs on: it has no forecast to pace a budget on, so it runs without the
    paced budgets, whose caps a kill switch beside it holds first-come (``FirstComeCaps``)."""
    return settings.model_copy(update={"budgets": tuple(b for b in settings.budgets if b.pacing != "forecast")})


def simulated_ledger(settings: Settings, window: SimulationWindow) -> InMemoryLedger:
    """The simulated agent's ledger: every pool of a budget held at 0 units from the start of the budget's month
    period holding the window's start until then. The simulation bills the pools from the window's start and
    counts each budget's spend from there (``agent.simulation.budgets``): the spend before it is 0 by definition,
    not unknown, and a ledger that began at the window would raise a budget-ledger-incomplete alert in every
    run with a monthly cap, asking for a bill that does not exist."""
    start: datetime = window.index[0].to_pydatetime()
    opened: dict[str, datetime] = {}
    for settings_budget in settings.budgets:
        since = Budget.from_settings(settings_budget).period(start).start
        for pool_id in settings_budget.pools:
            opened[pool_id] = min(opened.get(pool_id, start), since)
    ledger = InMemoryLedger()
    ledger.record_many([LedgerEntry(p, since, start, 0, 0.0) for p, since in sorted(opened.items()) if since < start])
    return ledger


def policy_agent(
    policy: str,
    settings: Settings,
    trace: Trace,
    window: SimulationWindow,
    cluster: SimulatedCluster,
    planner: PlannerSettings | None,
    extra_quantiles: Sequence[float] = (),
    forecaster: Forecaster | None = None,
) -> Agent:
    """The agent of an agent-driven ``policy`` on ``cluster``: the reactive one with a persistence forecast and
    cluster-autoscaler's release rule, the forecast one with ``forecaster`` or the configured one."""
    source = TraceSource(trace)
    if policy == "reactive":
        reactive = (planner or settings.planner).model_copy(
            update={
                "scale_down_stabilization": REACTIVE_UNNEEDED_TIME,
                "idle_hold_lead_times": 0.0,
                "slice_release_by_forecast": False,
                "service_level": None,
            }
        )
        ledger = simulated_ledger(settings, window)
        parts = AgentParts(source, PersistenceForecaster(), cluster, ledger, RecordingNotifier())
        return charging_budgets(
            Agent(without_paced_budgets(settings), parts, tick=window.step, step=window.step, planner=reactive)
        )
    if forecaster is None:
        forecaster = build_forecaster(settings.forecast, settings.planning_horizon(window.step))
    parts = AgentParts(source, forecaster, cluster, simulated_ledger(settings, window), RecordingNotifier())
    return charging_budgets(
        Agent(settings, parts, tick=window.step, step=window.step, planner=planner, extra_quantiles=extra_quantiles)
    )


def charging_budgets(agent: Agent) -> Agent:
    """``agent``, charging its ledger only if it has a budget: in a simulation nothing but its budgets' spend reads
    the ledger (the runs are billed from the simulated cluster), and without a budget that read is empty. Charging
    every pool at every tick for nothing took a quarter of a replay's time on helios-earth-slices.yaml."""
    agent.budget_watch.charges = bool(agent.budget_watch.budgets)
    return agent


def _stockouts(settings: Settings) -> dict[str, list[tuple[datetime, datetime]]]:
    out: dict[str, list[tuple[datetime, datetime]]] = {}
    for window in settings.simulation.stockouts:
        start, end = (_aware(datetime.fromisoformat(v)) for v in (window.start, window.end))
        out.setdefault(window.pool, []).append((start, end))
    return out


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
