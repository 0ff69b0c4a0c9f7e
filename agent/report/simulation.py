"""The HTML report of ``leadtime simulate``: the headline at equal service, what was simulated (trace, config,
prices, version), what the same service costs with the runs behind each figure, the policies as they ran (titled
as such: each at its own service level), capacity against demand per pool, and forecast bands per demand class;
the required credit of a bundled trace last."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from agent.planning import resolve_service_levels
from agent.planning.budget import Budget
from agent.planning.groups import demand_groups
from agent.report.budget_chart import budget_panels
from agent.report.charts import capacity_panels, cost_bars, forecast_panels
from agent.report.equal_service import equal_service_section
from agent.report.fleet import MAX_PANELS, top_classes, top_pools, top_pools_table
from agent.report.headline import energy_section, headline_section
from agent.report.hybrid import hybrid_section
from agent.report.provenance import accelerator_hours_note, provenance_section, service_levels_text, unit_name
from agent.simulation.bands import band_leads
from agent.simulation.budgets import budget_usage
from agent.simulation.oracle import floor_caveats
from agent.simulation.policies import REACTIVE_UNNEEDED_TIME
from agent.simulation.results import trace_attribution
from agent.simulation.runner import PolicyRun
from agent.simulation.window import SimulationWindow
from config.durations import format_duration
from config.schema import Settings

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}img{max-width:100%}.note{color:#666;font-size:90%}
td .note{font-size:80%}th.text,td.text{text-align:left}td.why{font-size:85%;color:#444;max-width:640px}
.lead{font-size:130%;font-weight:600}table.headline{font-size:115%}tr.forecast td{font-weight:700}
"""
AS_RUN_TITLE = "Each policy as run, at its own service level (not equal service)"


def write_simulation_report(
    path: Path,
    document: Mapping[str, Any],
    window: SimulationWindow,
    runs: Mapping[str, PolicyRun],
    settings: Settings,
    generated_at: datetime | None = None,
) -> None:
    """``generated_at`` (default: now) is said on the page only, not in ``results.json``, which stays the same for
    the same inputs."""
    pools = settings.pool_specs()
    sections = [
        f"<h1>leadtime simulation</h1>{headline_section(document)}",
        provenance_section(document, pools, generated_at or datetime.now(UTC)),
        equal_service_section(document.get("equal_service")),
        _as_run(document, window, runs, settings),
        _decisions(document.get("forecast_decisions"), document["window"]["observed_steps"]),
        _forecast_models(document.get("forecast_models")),
        energy_section(document),
        top_pools_table(pools, runs),
        hybrid_section(document.get("hybrid")),
        "<h2>Capacity against demand, per pool</h2>",
        "<p class='note'>Per pool, each policy's ready capacity against the demand of every class the pool may "
        "serve (grey). Where other pools may serve the same classes, that demand is theirs too: the grey area is "
        "what the pool could be asked for, not what it was given, and its panel names the pools sharing it.</p>",
        f'<img alt="ready capacity of each policy against demand per pool" src="{_capacity(window, runs, settings)}">',
    ]
    if settings.budgets:
        sections += [
            "<h2>Spend against each budget cap</h2>",
            "<p class='note'>Spend by the units each policy paid for, against the cap (dashed), counted from the "
            "window's start: a month period (or clock hour) already open then starts at 0 here, without what was "
            "spent in it before the window, and its panel says so; one that opens inside the window is counted "
            "whole. Only the forecast and reactive policies are held to caps.</p>",
            f'<img alt="spend of each policy against each budget cap" src="{_budgets(window, runs, settings)}">',
        ]
    bands = runs.get("forecast")
    if bands is not None and bands.forecast_bands:
        sections += [
            "<h2>Forecasts per demand class</h2>",
            f"<p class='note'>{html.escape(_bands_caption(window, bands, settings), quote=False)}"
            + (f" Shown: the {MAX_PANELS} classes with the most demand." if len(window.classes) > MAX_PANELS else "")
            + "</p>",
            f'<img alt="demand and forecast bands per class" src="{_forecasts(window, bands, settings)}">',
        ]
    trace = document["trace"]
    credit = trace["attribution"] if "attribution" in trace else trace_attribution(trace["path"])
    footer = f"Billing: {document['billing']}. {accelerator_hours_note(pools)}" + (f" {credit}" if credit else "")
    sections.append(f"<p class='note' id='credits'>{html.escape(footer)}</p>")
    page = "<!doctype html><html><head><meta charset='utf-8'><title>leadtime simulation</title>"
    page += f"<style>{STYLE}</style></head><body>{''.join(sections)}</body></html>\n"
    path.write_text(page, encoding="utf-8")


def _as_run(
    document: Mapping[str, Any], window: SimulationWindow, runs: Mapping[str, PolicyRun], settings: Settings
) -> str:
    """The policies as they ran, each at its own setting: titled and captioned so that nobody reads their costs as
    a comparison at the same service."""
    policies = document["policies"]
    compared = (
        " For what the same service costs, see the headline above and "
        "<a href='#equal-service'>What the same service costs</a>."
        if document.get("equal_service")
        else ""
    )
    caption = (
        "<p class='note'>Each policy at the setting it was configured with, not tuned to a common service: their "
        "unserved shares differ, so a cheaper row may simply leave more demand unserved."
        f"{compared} {html.escape(accelerator_hours_note(settings.pool_specs()))}</p>"
    )
    described = "".join(
        f"<li><b>{html.escape(name)}</b>: {html.escape(text)}</li>"
        for name, text in policy_descriptions(document, window, settings).items()
        if name in policies
    )
    chart = cost_bars(
        {n: r.cost_usd for n, r in runs.items()},
        {n: r.unserved_fraction for n, r in runs.items()},
        title=f"{AS_RUN_TITLE}: cost and unserved demand",
    )
    return (
        f"<section id='as-run'><h2>{html.escape(AS_RUN_TITLE)}</h2>{caption}<ul class='policies'>{described}</ul>"
        f"{_table(policies)}"
        f'<img alt="cost and unserved demand of each policy as run, each at its own service level" src="{chart}">'
        "</section>"
    )


def policy_descriptions(document: Mapping[str, Any], window: SimulationWindow, settings: Settings) -> dict[str, str]:
    """One sentence per policy: how it decides, and the setting it ran at."""
    levels = service_levels_text(document.get("forecast_service_levels"))
    history = len(window.history) * window.step
    before = f"the {format_duration(history)} of the trace before the window" if len(window.history) else "no history"
    return {
        "forecast": f"the leadtime agent: provisions each demand class for a quantile of its forecast, at {levels}.",
        "reactive": (
            "behaves like the Kubernetes cluster-autoscaler: scales up only on demand it already sees (running + "
            f"queued), releases a unit once it has been unneeded for {format_duration(REACTIVE_UNNEEDED_TIME)}; "
            f"headroom {settings.planner.headroom_units} units per pool, as configured."
        ),
        "static": (
            "a fixed cluster, never resized: each pool sized to the peak it needed (to serve all demand, cheapest "
            f"pools first, within its max_units) over {before} (steps with data only); interrupted spot units are "
            "replaced, a lead time later, as a fixed-size node pool replaces them."
        ),
        "oracle": _oracle_description(document, settings),
        "actual": (
            "what the pools really ran, read from Prometheus: each recorded unit serves from the step it is recorded, "
            "and each unit a pool added is billed from its pool's lead time before it is recorded, as a policy's "
            "unit is billed from its request."
        ),
    }


def _oracle_description(document: Mapping[str, Any], settings: Settings) -> str:
    """What the oracle is, and what its run left unserved: foresight cannot serve demand above a pool's max_units,
    through a stockout or on a spot unit interrupted before it is replaced. It is the lowest cost only for demand
    split between the pools in the planner's fill order, which is the floor unless ``floor_caveats`` finds a reason
    another split could cost less (pools of one class with different lead times, say): the text then says so."""
    unserved = document.get("policies", {}).get("oracle", {}).get("unserved_fraction") or 0.0
    caveats = floor_caveats(settings.pool_specs())
    if unserved <= 0.0 and not caveats:
        return "perfect foresight of demand: the lowest cost at which no demand is left unserved."
    text = "perfect foresight of demand: each unit requested a lead time before the demand it serves, at the lowest "
    if caveats:
        text += (
            "cost for demand split step by step between the pools in the planner's fill order (on-prem, reserved, "
            "spot, on-demand; then price per chip-hour)"
        )
    else:
        text += "cost"
    if unserved > 0.0:
        text += (
            f"; it still left {unserved:.2%} of demand unserved, which foresight cannot serve (spot units "
            "interrupted, pools out of stock or at max_units)"
        )
    else:
        text += "; no demand is left unserved"
    if caveats:
        text += (
            ". It is not necessarily the cost floor here, since another split can cost less: "
            + "; ".join(caveats)
            + ". A dearer pool ready sooner, for one, holds a short burst for fewer steps"
        )
    return text + "."


def _decisions(changes: Mapping[str, Mapping[str, Any]] | None, observed_steps: int) -> str:
    """Per demand group, how often the forecast changed the target against the calibrated last value."""
    if not changes:
        return ""
    head = "<tr><th>demand class</th><th>ticks compared</th><th>forecast asked more</th>"
    head += "<th>forecast asked less</th><th>changed</th></tr>"
    rows = [
        f"<tr><td>{html.escape(name)}</td><td>{row['ticks']:,}</td><td>{row['up']:,}</td><td>{row['down']:,}</td>"
        f"<td>{_changed(row['changed_fraction'])}</td></tr>"
        for name, row in sorted(changes.items())
    ]
    note = (
        "<p class='note'>Each tick, the planner's target for a demand class (whole units of its pools) from the "
        "configured forecast against the same computation from the calibrated last value. Ticks compared: those at "
        "which both had demand to plan on, that is every step with data and, into a gap, the first steps while the "
        "last value seen is no older than forecast.max_staleness; so they can outnumber the "
        f"{observed_steps:,} steps with data that cost and service count.</p>"
    )
    return f"<h2>Where the forecast changed the decision</h2>{note}<table>{head}{''.join(rows)}</table>"


def _changed(fraction: float | None) -> str:
    """A group with no tick compared (neither side had demand to plan on) has no fraction, not 0%."""
    return "not compared" if fraction is None else f"{fraction:.1%}"


def _forecast_models(uses: Mapping[str, Mapping[str, Any]] | None) -> str:
    """Per demand class, which model forecast its service level over the window, and the newest forecast's note."""
    if not uses:
        return ""
    head = "<tr><th>demand class</th><th>service level</th><th class='text'>model at that level (share of ticks)</th>"
    head += "<th class='text'>why, at the last tick</th></tr>"
    rows = []
    for name, use in sorted(uses.items()):
        shares = ", ".join(f"{model} {share:.0%}" for model, share in use["models"].items()) or "no forecast"
        rows.append(
            f"<tr><td>{html.escape(name)}</td><td>{use['service_level']:g}</td>"
            f"<td class='text'>{html.escape(shares)}</td>"
            f"<td class='text why'>{html.escape(use['note'] or '-')}</td></tr>"
        )
    note = (
        "<p class='note'>The model that forecast each class's service level, tick by tick (auto chooses per class "
        "and judges the global LightGBM model on all classes at once, level by level), and the newest forecast's "
        "note: the choice, its backtest score, the runner-up's, and the global model's pooled scores against the "
        "calibrated last value (pinball losses on recent held-out history: lower is better).</p>"
    )
    return f"<h2>Which model forecast each class</h2>{note}<table>{head}{''.join(rows)}</table>"


def _table(policies: Mapping[str, Mapping[str, Any]]) -> str:
    head = "<tr><th>policy</th><th>cost (USD)</th><th>accelerator-hours</th><th>unserved</th>"
    head += "<th>utilization</th><th>scale actions</th></tr>"
    rows = [
        f"<tr><td>{html.escape(name)}</td><td>{r['cost_usd']:,.0f}</td><td>{r['accelerator_hours']:,.0f}</td>"
        f"<td>{r['unserved_fraction']:.3%}</td><td>{r['utilization']:.1%}</td><td>{r['scale_actions']}</td></tr>"
        for name, r in policies.items()
    ]
    return f"<table class='as-run'>{head}{''.join(rows)}</table>"


def _capacity(window: SimulationWindow, runs: Mapping[str, PolicyRun], settings: Settings) -> str:
    panels, units = capacity_chart_panels(window, runs, settings)
    wide = 1 if len(panels) == 1 else 2
    return capacity_panels(window.index, panels, units, columns=wide, gaps=~window.observed)


def capacity_chart_panels(
    window: SimulationWindow, runs: Mapping[str, PolicyRun], settings: Settings
) -> tuple[list[tuple[str, np.ndarray, dict[str, np.ndarray]]], list[str]]:
    """Per pool drawn: its title, the demand of every class it may serve (NaN on gaps) and each policy's ready
    chips; and its unit. The demand is not the pool's own share: a title names the other pools that may serve
    some of the same classes, whose demand it is too."""
    panels = []
    units: list[str] = []
    specs = settings.pool_specs()
    for pool in top_pools(specs, runs):
        columns = [window.classes.index(name) for name in pool.serves if name in window.classes]
        demand = window.demand[:, columns].sum(axis=1) if columns else np.zeros(len(window.index))
        demand[np.isnan(window.demand[:, columns]).any(axis=1)] = np.nan
        capacity = {name: run.ready_units[pool.pool_id] * pool.chips_per_unit for name, run in runs.items()}
        unit = unit_name(pool.family)
        units.append(unit)
        title = f"{pool.pool_id} ({pool.chips_per_unit} {unit}/unit, lead time {format_duration(pool.lead_time)})"
        shared = [p.pool_id for p in specs if p.pool_id != pool.pool_id and set(p.serves) & set(pool.serves)]
        if shared:
            title += f"; demand it may serve, shared with {_shared(shared)}"
        panels.append((title, demand, capacity))
    return panels, units


def _shared(pools: Sequence[str]) -> str:
    return ", ".join(pools) if len(pools) <= 3 else f"{', '.join(pools[:3])} and {len(pools) - 3} more"


def _budgets(window: SimulationWindow, runs: Mapping[str, PolicyRun], settings: Settings) -> str:
    return budget_panels(window.index, budget_chart_panels(window, runs, settings))


def budget_chart_panels(
    window: SimulationWindow, runs: Mapping[str, PolicyRun], settings: Settings
) -> list[tuple[str, dict[str, np.ndarray], float]]:
    """Per cap: its title, each policy's spend at each step and the cap. The spend is counted from the window's
    start, so a period (month or clock hour) open before it is titled as spend since the window's start: what
    was spent in it earlier is not known here."""
    usage = {name: budget_usage(settings, window, run) for name, run in runs.items()}
    start: datetime = window.index[0].to_pydatetime()
    panels = []
    for i, budget in enumerate(settings.budgets):
        model = Budget.from_settings(budget)
        if budget.monthly_cap_usd is not None:
            spend = {name: usages[i].period_spend for name, usages in usage.items()}
            title = _spend_title("month period", model.period(start).start, start)
            panels.append((f"{budget.name}: {title}", spend, budget.monthly_cap_usd))
        if budget.hourly_cap_usd is not None:
            spend = {name: usages[i].hour_spend for name, usages in usage.items()}
            title = _spend_title("hour", model.hour(start).start, start)
            panels.append((f"{budget.name}: {title}", spend, budget.hourly_cap_usd))
    return panels


def _spend_title(period: str, opened: datetime, start: datetime) -> str:
    if opened >= start:
        return f"spend this {period}"
    when = f"{start.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    return f"spend this {period}, counted from the window's start ({when}) in the {period} open then"


def _bands_caption(window: SimulationWindow, run: PolicyRun, settings: Settings) -> str:
    """What the bands are (each class's own forecast, issued one lead time ahead: the one the capacity for that step
    was bought on for a class planned on its own forecast, not for classes planned together on the forecast of their
    summed demand, which is not drawn) and how often demand stayed within them."""
    leads = band_leads(settings.pool_specs(), window.step)
    levels = resolve_service_levels(settings.demand_class_models(), settings.pool_specs(), settings.planner)
    drawn = [name for name in window.classes if name in run.forecast_bands]
    ahead = sorted({leads.get(name, 0) for name in drawn})
    quantiles = sorted({levels[name] for name in drawn if name in levels})
    when = " to ".join(format_duration(window.step * n) for n in dict.fromkeys((ahead[0], ahead[-1]))) if ahead else ""
    level = " to ".join(f"{q:g}" for q in dict.fromkeys((quantiles[0], quantiles[-1]))) if quantiles else "?"
    text = (
        f"Band: the forecast median up to its {level} quantile (the service level) of each class's own demand, issued "
        + (f"{when} before each step (the lead time)" if ahead and ahead[-1] else "for the step its tick serves")
        + ". "
        + _bought_on(settings, drawn)
    )
    within, counted = 0, 0
    for i, name in enumerate(window.classes):
        if name not in run.forecast_bands:
            continue
        upper, demand = run.forecast_bands[name][1], window.demand[:, i]
        known = ~np.isnan(upper) & ~np.isnan(demand)
        counted += int(known.sum())
        within += int((demand[known] <= upper[known] + 1e-9).sum())
    if counted:
        text += f" Demand stayed at or below the band's top in {within / counted:.1%} of the class-steps forecast."
    return text


def _bought_on(settings: Settings, drawn: Sequence[str]) -> str:
    """Which forecast the capacity was bought on: a class's own, unless it may use exactly the same pools as other
    classes; those are planned together on the forecast of their summed demand at the highest of their service
    levels (``agent.planning.groups``), a band the report does not draw."""
    groups = demand_groups([c.name for c in settings.demand_class_models()], settings.pool_specs())
    together = [g for g in groups if g.is_aggregate and any(m in drawn for m in g.members)]
    if not together:
        return "It is the forecast the capacity for that step was bought on."
    alone = [name for name in drawn if not any(name in g.members for g in together)]
    named = "; ".join(f"{g.name}, {len(g.members)} classes" for g in together)
    text = (
        f"Classes that may use exactly the same pools were planned together ({named}): the capacity for their steps "
        "was bought on the forecast of their summed demand, at the highest of their service levels, which is not "
        "drawn here, so their bands show how each class's own forecast did, not what was bought."
    )
    if alone:
        text += f" For the other {len(alone)} class(es) the band is the forecast the capacity was bought on."
    return text


def _forecasts(window: SimulationWindow, run: PolicyRun, settings: Settings) -> str:
    shown = [i for i in top_classes(window.classes, window.demand) if window.classes[i] in run.forecast_bands]
    panels = [(window.classes[i], window.demand[:, i], *run.forecast_bands[window.classes[i]]) for i in shown]
    families = {c.name: c.family for c in settings.demand_class_models()}
    units = [unit_name(families[window.classes[i]]) if window.classes[i] in families else "accelerators" for i in shown]
    return forecast_panels(window.index, panels, unit_label=units)
