"""The first screen of the simulation report: what the forecast policy's service costs against each other way of
running the cluster (USD and %, unserved demand beside it), which runs were held to the budget caps and the budget
alerts of those a cap held back, then energy and carbon per policy. Its lead sentence, with the marks of its savings
and what each means (``headline_lines``), is what ``leadtime simulate`` prints first."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from agent.report.equal_service import ALREADY_MET, UNEQUAL_MARK
from agent.simulation.headline import same_service


def headline_section(document: Mapping[str, Any]) -> str:
    head = document.get("headline")
    if not head:
        return ""
    forecast = head["forecast"]
    capped = any(row.get("held_to_budgets") for row in (forecast, *head["against"]))
    held = "<th>held to budget caps</th>" if capped else ""
    rows = [
        f"<tr><th>policy</th><th>basis</th>{held}<th>cost (USD)</th><th>unserved</th>"
        "<th>leadtime saves (USD)</th><th>leadtime saves (%)</th></tr>",
        f"<tr class='forecast'><td>leadtime (forecast)</td><td>{_basis(forecast)}</td>{_held(forecast, capped)}"
        f"<td>{forecast['cost_usd']:,.0f}</td><td>{forecast['unserved_fraction']:.2%}</td><td></td><td></td></tr>",
    ]
    for row in head["against"]:
        percent = row["forecast_saves_percent"]
        mark = _marks(forecast, row)
        rows.append(
            f"<tr data-policy='{html.escape(row['policy'])}'><td>{html.escape(row['policy'])}</td>"
            f"<td>{_basis(row)}</td>{_held(row, capped)}<td>{row['cost_usd']:,.0f}</td>"
            f"<td>{row['unserved_fraction']:.2%}</td>"
            f"<td class='saving'>{row['forecast_saves_usd']:+,.0f}{mark}</td>"
            f"<td class='saving'>{'' if percent is None else f'{percent:+.1f}%'}{mark}</td></tr>"
        )
    lead, _ = _lead_sentence(head)
    note = (
        "Positive savings: leadtime costs less. Forecast and reactive are tuned to leave the same share of demand "
        "unserved where an equal-service comparison was made (the runs each figure rests on are under "
        "<a href='#equal-service'>What the same service costs</a>); static and oracle are shown as they ran and "
        "actual as the cluster ran, with their own unserved share beside them."
    )
    if (unequal := _unequal_note(head)) is not None:
        note += f" {html.escape(unequal, quote=False)}"
    return (
        f"<section id='headline'><p class='lead'>{html.escape(lead)}</p>"
        f"<table class='headline'>{''.join(rows)}</table><p class='note'>{note}</p>"
        f"{_budget_note(head) if capped else ''}</section>"
    )


UNHELD_MARK = " †"  # a saving against a run not held to the caps, while a cap held the forecast run back


def headline_lines(document: Mapping[str, Any]) -> list[str]:
    """The headline in plain text, as the report leads with it: the lead sentence, with the marks of its savings,
    then a line for each mark it uses, the report's own note of what that mark means. ``leadtime simulate`` prints
    these; none without a headline (no forecast run)."""
    head = document.get("headline")
    if not head:
        return []
    lead, marks = _lead_sentence(head)
    notes = ((UNEQUAL_MARK, _unequal_note(head)), (UNHELD_MARK, _unheld_note(head)))
    return [lead, *(note for mark, note in notes if mark in marks and note is not None)]


def _marks(forecast: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """The marks of a saving against ``row``: another service than the forecast figure's (‡), a run not held to the
    caps while a cap held the forecast run back (†)."""
    unheld = _bound(forecast) and _unheld(row)
    return (UNEQUAL_MARK if _unequal(forecast, row) else "") + (UNHELD_MARK if unheld else "")


def _unequal_note(head: Mapping[str, Any]) -> str | None:
    """What ‡ means in the headline, where a saving is so marked; None where none is."""
    forecast = head["forecast"]
    if not any(_unequal(forecast, row) for row in head["against"]):
        return None
    target = head.get("target_unserved")
    below = (
        f"; where even the cheapest setting tried leaves less demand unserved than the {target:.1%} target, a "
        "tuned figure is that run's, at its own unserved share (its basis says so)"
        if target is not None and any(row.get("note") == ALREADY_MET for row in (forecast, *head["against"]))
        else ""
    )
    return (
        f"{UNEQUAL_MARK.strip()} not at equal service: the run's unserved share is not that of leadtime's "
        f"figure ({forecast['unserved_fraction']:.2%}): a run shown as it ran is at its own share{below}. A "
        "saving marked so compares costs of different service (the run that leaves less unserved buys more "
        "capacity for it)."
    )


def _unheld_note(head: Mapping[str, Any]) -> str | None:
    """What † means in the headline, where a saving is so marked (a cap held the forecast run back and a run was
    not held to the caps); None where none is."""
    if not _bound(head["forecast"]) or not any(_unheld(row) for row in head["against"]):
        return None
    if head["forecast"].get("budget_held_from") == "trials":
        # tuned to the target: the runs it rests on were held back, its figure's share of demand unserved is the
        # target's all the same
        return (
            "A cap held back runs the forecast figure rests on: it bought less capacity for the same service, so its "
            f"savings against the runs not held to the caps ({UNHELD_MARK.strip()}) are partly the cap's."
        )
    return (
        "A cap held the forecast run back, so its savings against the runs not held to the caps "
        f"({UNHELD_MARK.strip()}) are partly the cap's: it bought less capacity than it planned and left more "
        "demand unserved than it would have without the cap."
    )


def _unequal(forecast: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Whether a saving compares different service: the row left another share of demand unserved than the
    forecast's figure (a run shown as it ran, static, the oracle or actual, or a figure at its cheapest setting's own
    share, below the target, on either side)."""
    return not same_service(float(row["unserved_fraction"]), float(forecast["unserved_fraction"]))


def _unheld(row: Mapping[str, Any]) -> bool:
    """Whether a run ran as if no cap were set: not held to the caps, and not the actual row, which ran under
    whatever caps the cluster enforced (as recorded)."""
    return not row.get("held_to_budgets") and not row.get("budgets_as_recorded")


def _bound(row: Mapping[str, Any]) -> bool:
    """Whether a cap held the run back: held to the caps, with steps at which a cap cut, trimmed or paced it, or
    a budget alert that stopped, trimmed or deferred its scale-ups."""
    return bool(row.get("held_to_budgets") and (row.get("budget_held_steps") or row.get("budget_alerts")))


def _held(row: Mapping[str, Any], capped: bool) -> str:
    if not capped:
        return ""
    if row.get("budgets_as_recorded"):
        return "<td class='text'>as recorded</td>"
    if not row.get("held_to_budgets"):
        return "<td class='text'>no</td>"
    steps = row.get("budget_held_steps") or 0
    if not _bound(row):
        return "<td class='text'>yes</td>"
    where = " in a run it rests on" if row.get("budget_held_from") == "trials" else ""
    return f"<td class='text'>yes: held back{f' at {steps:,} steps' if steps else ''}{where}</td>"


def _budget_note(head: Mapping[str, Any]) -> str:
    """Which runs the caps held, what a saving against the others means when a cap bound the forecast run, and the
    budget alerts of each held run (in brief: kind, subject, how often, from when, the first one's words)."""
    forecast = head["forecast"]
    runs = [("forecast", forecast), *((row["policy"], row) for row in head["against"])]
    held = [name for name, row in runs if row.get("held_to_budgets")]
    free = [name for name, row in runs if _unheld(row)]
    recorded = [name for name, row in runs if row.get("budgets_as_recorded")]
    text = f"Budget caps: {_names(held)} {'is' if len(held) == 1 else 'are'} held to them"
    text += f"; {_names(free)} {'is' if len(free) == 1 else 'are'} not, and ran as if no cap were set" if free else ""
    text += (
        f"; {_names(recorded)} is what the cluster did, under whatever caps it enforced (as recorded)."
        if recorded
        else "."
    )
    if (unheld := _unheld_note(head)) is not None:
        text += f" {unheld}"
    items = [
        f"<li><b>{html.escape(name)}</b>: {html.escape(alert['kind'])}, {html.escape(alert['subject'])}, "
        f"{alert['count']} time{'s' if alert['count'] != 1 else ''} from {html.escape(_when(alert['first_at']))}: "
        f"{html.escape(alert['summary'])}</li>"
        for name, row in runs
        for alert in row.get("budget_alerts") or row.get("configured_budget_alerts") or ()
    ]
    alerts = (
        "<p class='note'>Budget alerts that held a run back (the runs as configured):</p>"
        f"<ul class='budget-alerts note'>{''.join(items)}</ul>"
        if items
        else "<p class='note'>No budget alert held a run back.</p>"
    )
    return f"<p class='note budget-caps'>{html.escape(text)}</p>{alerts}"


def _names(names: list[str]) -> str:
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"


def _when(stamp: str) -> str:
    return stamp.replace("T", " ").removesuffix(":00+00:00") + " UTC" if stamp.endswith("+00:00") else stamp


def _lead_sentence(head: Mapping[str, Any]) -> tuple[str, str]:
    """The lead sentence, each saving with its marks as in the table, and the marks it uses."""
    forecast = head["forecast"]
    bound = _bound(forecast)
    parts = []
    marks = ""
    for row in head["against"]:
        percent = row["forecast_saves_percent"]
        if percent is None:
            continue
        verb = "less" if percent >= 0 else "more"
        unheld = ", not held to the caps" if bound and _unheld(row) else ""
        below = (
            f" at its own {row['unserved_fraction']:.2%} unserved, below the {head['target_unserved']:.1%} target"
            if row.get("note") == ALREADY_MET
            else ""
        )
        other = (
            f", which left {row['unserved_fraction']:.2%} unserved against leadtime's "
            f"{forecast['unserved_fraction']:.2%}"
            if _unequal(forecast, row) and not below
            else ""
        )
        mark = _marks(forecast, row)
        marks += mark
        parts.append(
            f"{abs(percent):.1f}% {verb} than {row['policy']} ({row['cost_usd']:,.0f} USD{below}{unheld}){other}{mark}"
        )
    basis = forecast["basis"]
    if basis == "as run":
        basis = f"as run, {forecast['unserved_fraction']:.2%} unserved"
    elif forecast.get("note") == ALREADY_MET:
        basis = (
            f"{forecast['unserved_fraction']:.2%} unserved: its cheapest setting tried already beats the "
            f"{head['target_unserved']:.1%} target"
        )
    if bound:
        basis += "; held back by a budget cap"
    lead = f"leadtime: {forecast['cost_usd']:,.0f} USD ({basis})"
    return (f"{lead}, " + "; ".join(parts) + "." if parts else f"{lead}."), marks


def _basis(row: Mapping[str, Any]) -> str:
    """A row's basis; a tuned figure whose cheapest setting already beats the target says so (its unserved share is
    below the target, not at it)."""
    text = html.escape(row["basis"])
    if row.get("note") == ALREADY_MET:
        text += "<br><span class='note'>target already met at the cheapest setting tried</span>"
    return text


def energy_section(document: Mapping[str, Any]) -> str:
    energy = document.get("energy")
    if not energy:
        return ""
    head = (
        "<tr><th>policy</th><th>accelerator-hours</th><th>energy (kWh)</th><th>of which idle (kWh)</th>"
        "<th>carbon (kg CO2e)</th></tr>"
    )
    rows = [
        f"<tr><td>{html.escape(name)}</td><td>{r['accelerator_hours']:,.0f}</td><td>{r['energy_kwh']:,.0f}</td>"
        f"<td>{r['idle_energy_kwh']:,.0f}</td><td>{r['carbon_kg_co2e']:,.0f}</td></tr>"
        for name, r in document["policies"].items()
    ]
    per_pool = energy.get("pool_watts_per_chip") or {}
    watts = f"{energy['watts_per_chip']:g} W per chip" + (
        " (" + ", ".join(f"{html.escape(p)}: {w:g} W" for p, w in per_pool.items()) + ")" if per_pool else ""
    )
    note = (
        f"Paid accelerator-hours x {watts} x PUE {energy['pue']:g} x {energy['grid_gco2e_per_kwh']:g} gCO2e/kWh "
        "(configuration key <code>energy</code>). Idle: the share of paid accelerator-hours that served no demand."
    )
    return f"<h2>Energy and carbon</h2><table>{head}{''.join(rows)}</table><p class='note'>{note}</p>"
