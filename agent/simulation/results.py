"""The ``results.json`` document of a simulation: per-policy figures plus what was simulated, with what (and by
which leadtime version; the credit a bundled trace requires)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.planning import resolve_service_levels
from agent.simulation.budgets import budget_summary, budget_usage
from agent.simulation.decisions import DecisionChanges
from agent.simulation.energy import energy_summary
from agent.simulation.forecast_models import ModelUse
from agent.simulation.headline import headline
from agent.simulation.hybrid import hybrid_summary, is_hybrid
from agent.simulation.runner import PolicyRun
from agent.simulation.window import SimulationWindow
from agent.sources.trace import Trace
from agent.version import package_version
from config.schema import Settings

# The credit each bundled trace requires (data/README.md), by its place under data/: directory and file name,
# wherever the checkout is. A user's own trace, or demand replayed from Prometheus, is credited to nobody here.
BUNDLED_TRACES: dict[tuple[str, str], str] = {
    ("helios-earth", "demand_5min.csv.gz"): (
        'SenseTime Helios "Earth" cluster: Hu et al., "Characterization and Prediction of Deep Learning Workloads '
        "in Large-Scale GPU Datacenters\", SC'21 (CC BY 4.0)"
    ),
    ("philly", "busy_nodes_5min.csv.gz"): (
        'Microsoft Philly cluster: Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN '
        "Training Workloads\", USENIX ATC'19 (CC BY 4.0)"
    ),
    ("servegen", "demand_10min.csv.gz"): (
        'Alibaba Cloud Model Studio (ServeGen): Xiang et al., "ServeGen: Workload Characterization and Generation '
        'of Large Language Model Serving in Production", arXiv:2505.09999 (2025) (Apache-2.0)'
    ),
}


def results_document(
    settings: Settings,
    config_path: str,
    trace: Trace,
    window: SimulationWindow,
    runs: Mapping[str, PolicyRun],
    equal_service: Mapping[str, Any] | None = None,
    decisions: Mapping[str, DecisionChanges] | None = None,
    models: Mapping[str, ModelUse] | None = None,
) -> dict[str, Any]:
    observed = int(window.observed.sum())
    document: dict[str, Any] = {
        "leadtime_version": package_version(),
        "trace": {
            "path": trace.path,
            "series": list(window.classes),
            "step_s": int(window.step.total_seconds()),
            "attribution": trace_attribution(trace.path),  # the credit a bundled trace requires; None otherwise
        },
        "window": {
            "start": window.index[0].isoformat(),
            "end": (window.index[-1] + window.step).isoformat(),
            "steps": len(window.index),
            "observed_steps": observed,
            "gap_steps": len(window.index) - observed,
            "missing_steps_by_class": window.missing_by_class(),
        },
        "config": {"path": config_path, "settings": settings.model_dump(mode="json")},
        "billing": "a unit is paid from when it is requested until it is released; gap steps are not counted",
        "policies": {
            name: {**run.summary(), **budget_summary(settings, window, run), **energy_summary(settings, window, run)}
            for name, run in runs.items()
        },
        "energy": settings.energy.model_dump(mode="json"),
    }
    if "forecast" in runs:  # the quantile the forecast policy provisioned each class for, as run
        document["forecast_service_levels"] = resolve_service_levels(
            settings.demand_class_models(), settings.pool_specs(), settings.planner
        )
    if is_hybrid(settings.pool_specs()):
        default = settings.planner.waiting_cost_per_accelerator_hour_usd
        costs = {c.name: _or(c.waiting_cost_per_accelerator_hour_usd, default) for c in settings.demand_classes}
        usages = {name: budget_usage(settings, window, run) for name, run in runs.items()}
        document["hybrid"] = hybrid_summary(settings.pool_specs(), window, runs, costs, usages)
    if equal_service is not None:
        document["equal_service"] = dict(equal_service)
        document["equal_service_method"] = (
            "reactive: smallest constant headroom (units per pool) meeting the target; forecast: lowest service "
            "level meeting it, one for every demand class (in place of the classes' own levels and those from "
            "waiting costs); costs interpolated linearly between the two settings that bracket the target"
        )
    if decisions is not None:
        document["forecast_decisions"] = {name: changes.summary() for name, changes in decisions.items()}
        document["forecast_decisions_method"] = (
            "per demand group and tick, the planner's need from the configured forecast against the same need from "
            "the calibrated last value, in whole units of the group's pools: up = the forecast asked for more"
        )
    if models is not None:
        document["forecast_models"] = {name: use.summary() for name, use in sorted(models.items())}
        document["forecast_models_method"] = (
            "per demand class, the share of ticks each model forecast the class's service level (as run), and the "
            "newest forecast's note: for auto, its choice, the score, the runner-up's and the global model's pooled "
            "scores (pinball losses on held-out recent history, lower is better)"
        )
    document["headline"] = headline(document)
    return document


def _or(value: float | None, default: float | None) -> float | None:
    return value if value is not None else default


def trace_attribution(path: str) -> str | None:
    """The required credit of the bundled trace at ``path`` (as given to ``--trace``), or None for any other. The
    path is resolved from the working directory first, so that the bundled file named without its directory (from
    inside it), through ``..`` or a symbolic link is still credited."""
    if path.startswith("prometheus "):
        return None
    parts = Path(path.replace("\\", "/")).resolve().parts
    if len(parts) < 2:
        return None
    credit = BUNDLED_TRACES.get((parts[-2], parts[-1]))
    return None if credit is None else f"Trace data: {credit}."
