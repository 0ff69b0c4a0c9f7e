"""The first screen of the simulation report: what the forecast policy's service costs against each other way of
running the cluster (USD and %, unserved demand beside it), then energy and carbon per policy."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from agent.report.equal_service import ALREADY_MET


def headline_section(document: Mapping[str, Any]) -> str:
    head = document.get("headline")
    if not head:
        return ""
    forecast = head["forecast"]
    rows = [
        "<tr><th>policy</th><th>basis</th><th>cost (USD)</th><th>unserved</th>"
        "<th>leadtime saves (USD)</th><th>leadtime saves (%)</th></tr>",
        f"<tr class='forecast'><td>leadtime (forecast)</td><td>{_basis(forecast)}</td>"
        f"<td>{forecast['cost_usd']:,.0f}</td><td>{forecast['unserved_fraction']:.2%}</td><td></td><td></td></tr>",
    ]
    for row in head["against"]:
        percent = row["forecast_saves_percent"]
        rows.append(
            f"<tr data-policy='{html.escape(row['policy'])}'><td>{html.escape(row['policy'])}</td>"
            f"<td>{_basis(row)}</td><td>{row['cost_usd']:,.0f}</td>"
            f"<td>{row['unserved_fraction']:.2%}</td><td class='saving'>{row['forecast_saves_usd']:+,.0f}</td>"
            f"<td class='saving'>{'' if percent is None else f'{percent:+.1f}%'}</td></tr>"
        )
    lead = _lead_sentence(head)
    note = (
        "Positive savings: leadtime costs less. Forecast and reactive are tuned to leave the same share of demand "
        "unserved where an equal-service comparison was made (the runs each figure rests on are under "
        "<a href='#equal-service'>What the same service costs</a>); static, oracle and actual are shown as they "
        "ran, with their own unserved share beside them."
    )
    return (
        f"<section id='headline'><p class='lead'>{html.escape(lead)}</p>"
        f"<table class='headline'>{''.join(rows)}</table><p class='note'>{note}</p></section>"
    )


def _lead_sentence(head: Mapping[str, Any]) -> str:
    forecast = head["forecast"]
    parts = []
    for row in head["against"]:
        percent = row["forecast_saves_percent"]
        if percent is None:
            continue
        verb = "less" if percent >= 0 else "more"
        parts.append(f"{abs(percent):.1f}% {verb} than {row['policy']} ({row['cost_usd']:,.0f} USD)")
    basis = forecast["basis"]
    if basis == "as run":
        basis = f"as run, {forecast['unserved_fraction']:.2%} unserved"
    elif forecast.get("note") == ALREADY_MET:
        basis = (
            f"{forecast['unserved_fraction']:.2%} unserved: its cheapest setting tried already beats the "
            f"{head['target_unserved']:.1%} target"
        )
    lead = f"leadtime: {forecast['cost_usd']:,.0f} USD ({basis})"
    return f"{lead}, " + "; ".join(parts) + "." if parts else f"{lead}."


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
