"""The HTML report of ``leadtime simulate``: the results table, cost and service at a glance, capacity against
demand per pool, and forecast bands per demand class."""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from agent.report.budget_chart import budget_panels
from agent.report.charts import capacity_panels, cost_bars, forecast_panels
from agent.report.fleet import MAX_PANELS, top_classes, top_pools, top_pools_table
from agent.report.headline import energy_section, headline_section
from agent.report.hybrid import hybrid_section
from agent.simulation.budgets import budget_usage
from agent.simulation.runner import PolicyRun
from agent.simulation.window import SimulationWindow
from config.durations import format_duration
from config.schema import Settings

ATTRIBUTION = (
    'Trace data: Hu et al., "Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU '
    "Datacenters\", SC'21 (Helios, CC BY 4.0), where the bundled trace is used."
)
STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}img{max-width:100%}.note{color:#666;font-size:90%}
.lead{font-size:130%;font-weight:600}table.headline{font-size:115%}tr.forecast td{font-weight:700}
"""


def write_simulation_report(
    path: Path,
    document: Mapping[str, Any],
    window: SimulationWindow,
    runs: Mapping[str, PolicyRun],
    settings: Settings,
) -> None:
    sections = [
        f"<h1>leadtime simulation</h1>{headline_section(document)}<p>{_describe(document)}</p>",
        _table(document["policies"]),
        f'<img alt="cost and unserved demand by policy" src="{_costs(runs)}">',
        _equal_service(document.get("equal_service")),
        _decisions(document.get("forecast_decisions")),
        energy_section(document),
        top_pools_table(settings.pool_specs(), runs),
        hybrid_section(document.get("hybrid")),
        "<h2>Capacity against demand, per pool</h2>",
        f'<img alt="ready capacity of each policy against demand per pool" src="{_capacity(window, runs, settings)}">',
    ]
    if settings.budgets:
        sections += [
            "<h2>Spend against each budget cap</h2>",
            "<p class='note'>Spend in the current period (or clock hour) by the units each policy paid for, "
            "against the cap (dashed). Only the forecast and reactive policies are held to caps.</p>",
            f'<img alt="spend of each policy against each budget cap" src="{_budgets(window, runs, settings)}">',
        ]
    bands = runs.get("forecast")
    if bands is not None and bands.forecast_bands:
        sections += [
            "<h2>Forecasts per demand class</h2>",
            "<p class='note'>Band: median to the highest configured quantile, issued one step ahead"
            + (f"; the {MAX_PANELS} classes with the most demand." if len(window.classes) > MAX_PANELS else ".")
            + "</p>",
            f'<img alt="demand and forecast bands per class" src="{_forecasts(window, bands)}">',
        ]
    sections.append(f"<p class='note'>{html.escape(document['billing'])}. {html.escape(ATTRIBUTION)}</p>")
    page = "<!doctype html><html><head><meta charset='utf-8'><title>leadtime simulation</title>"
    page += f"<style>{STYLE}</style></head><body>{''.join(sections)}</body></html>\n"
    path.write_text(page, encoding="utf-8")


def _equal_service(comparison: Mapping[str, Mapping[str, Mapping[str, Any]]] | None) -> str:
    """What the same service costs, per unserved-demand target, with the forecast policy's ratios."""
    if not comparison:
        return ""
    head = "<tr><th>unserved target</th><th>forecast (USD)</th><th>reactive (USD)</th><th>oracle (USD)</th>"
    head += "<th>forecast / reactive</th><th>forecast / oracle</th></tr>"
    rows = []
    for target, row in comparison.items():
        costs = {name: row.get(name, {}).get("cost_usd") for name in ("forecast", "reactive", "oracle")}
        cells = "".join(f"<td>{c:,.0f}</td>" if c is not None else "<td>not reached</td>" for c in costs.values())
        ratios = "".join(
            f"<td>{costs['forecast'] / costs[base]:.3f}x</td>" if costs["forecast"] and costs[base] else "<td></td>"
            for base in ("reactive", "oracle")
        )
        rows.append(f"<tr><td>{float(target):.1%}</td>{cells}{ratios}</tr>")
    note = (
        "<p class='note'>Each policy tuned to leave the same share of demand unserved: the reactive policy with "
        "the smallest constant headroom (units per pool), the forecast policy with the lowest service level "
        "that meets the target; costs interpolated between the two settings that bracket it.</p>"
    )
    return f"<h2>What the same service costs</h2>{note}<table>{head}{''.join(rows)}</table>"


def _decisions(changes: Mapping[str, Mapping[str, Any]] | None) -> str:
    """Per demand group, how often the forecast changed the target against the calibrated last value."""
    if not changes:
        return ""
    head = "<tr><th>demand class</th><th>ticks</th><th>forecast asked more</th><th>forecast asked less</th>"
    head += "<th>changed</th></tr>"
    rows = [
        f"<tr><td>{html.escape(name)}</td><td>{row['ticks']:,}</td><td>{row['up']:,}</td><td>{row['down']:,}</td>"
        f"<td>{row['changed_fraction']:.1%}</td></tr>"
        for name, row in sorted(changes.items())
    ]
    note = (
        "<p class='note'>Each tick, the planner's target for a demand class (whole units of its pools) from the "
        "configured forecast against the same computation from the calibrated last value.</p>"
    )
    return f"<h2>Where the forecast changed the decision</h2>{note}<table>{head}{''.join(rows)}</table>"


def _describe(document: Mapping[str, Any]) -> str:
    w, t = document["window"], document["trace"]
    return html.escape(
        f"Trace {t['path']} ({len(t['series'])} demand classes, {t['step_s'] // 60}-minute steps), window "
        f"{w['start']} to {w['end']} ({w['steps']} steps, {w['gap_steps']} gap steps not counted); "
        f"config {document['config']['path']}."
    )


def _table(policies: Mapping[str, Mapping[str, Any]]) -> str:
    head = "<tr><th>policy</th><th>cost (USD)</th><th>accelerator-hours</th><th>unserved</th>"
    head += "<th>utilization</th><th>scale actions</th></tr>"
    rows = [
        f"<tr><td>{html.escape(name)}</td><td>{r['cost_usd']:,.0f}</td><td>{r['accelerator_hours']:,.0f}</td>"
        f"<td>{r['unserved_fraction']:.3%}</td><td>{r['utilization']:.1%}</td><td>{r['scale_actions']}</td></tr>"
        for name, r in policies.items()
    ]
    return f"<table>{head}{''.join(rows)}</table>"


def _costs(runs: Mapping[str, PolicyRun]) -> str:
    return cost_bars({n: r.cost_usd for n, r in runs.items()}, {n: r.unserved_fraction for n, r in runs.items()})


def _capacity(window: SimulationWindow, runs: Mapping[str, PolicyRun], settings: Settings) -> str:
    panels = []
    for pool in top_pools(settings.pool_specs(), runs):
        columns = [window.classes.index(name) for name in pool.serves if name in window.classes]
        demand = window.demand[:, columns].sum(axis=1) if columns else np.zeros(len(window.index))
        demand[np.isnan(window.demand[:, columns]).any(axis=1)] = np.nan
        capacity = {name: run.ready_units[pool.pool_id] * pool.chips_per_unit for name, run in runs.items()}
        panels.append(
            (
                f"{pool.pool_id} ({pool.chips_per_unit} chips/unit, lead time {format_duration(pool.lead_time)})",
                demand,
                capacity,
            )
        )
    return capacity_panels(window.index, panels, "chips", columns=1 if len(panels) == 1 else 2, gaps=~window.observed)


def _budgets(window: SimulationWindow, runs: Mapping[str, PolicyRun], settings: Settings) -> str:
    usage = {name: budget_usage(settings, window, run) for name, run in runs.items()}
    panels = []
    for i, budget in enumerate(settings.budgets):
        if budget.monthly_cap_usd is not None:
            spend = {name: usages[i].period_spend for name, usages in usage.items()}
            panels.append((f"{budget.name}: spend this month period", spend, budget.monthly_cap_usd))
        if budget.hourly_cap_usd is not None:
            spend = {name: usages[i].hour_spend for name, usages in usage.items()}
            panels.append((f"{budget.name}: spend this hour", spend, budget.hourly_cap_usd))
    return budget_panels(window.index, panels)


def _forecasts(window: SimulationWindow, run: PolicyRun) -> str:
    shown = [i for i in top_classes(window.classes, window.demand) if window.classes[i] in run.forecast_bands]
    panels = [(window.classes[i], window.demand[:, i], *run.forecast_bands[window.classes[i]]) for i in shown]
    return forecast_panels(window.index, panels)
