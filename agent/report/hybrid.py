"""The hybrid-fleet section of the simulation report, drawn from the ``hybrid`` part of ``results.json``: what
each policy's cloud burst cost and how much queueing it avoided against the on-prem-only baseline, overall and
per demand class."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any


def hybrid_section(hybrid: Mapping[str, Any] | None) -> str:
    """Empty unless the scenario has on-prem pools and cloud pools to burst to."""
    if not hybrid:
        return ""
    rows: Mapping[str, Mapping[str, Any]] = hybrid["rows"]
    note = (
        f"<p class='note'>On-prem pools ({len(hybrid['onprem_pools'])}, {hybrid['onprem_chips']} chips) are "
        f"filled first; demand above them bursts to {', '.join(map(html.escape, hybrid['burst_pools']))}. "
        f"{html.escape(hybrid['method'])}. Demand served by a burst is still in the trace's later steps (the "
        "trace cannot say how soon those jobs would have finished), so avoided queueing is a lower bound.</p>"
    )
    body = f"{_overview(hybrid, rows)}{_budget(hybrid, rows)}{_per_class(rows)}{_avoided_per_class(rows)}"
    return f"<h2>Hybrid fleet: on-prem first, cloud burst</h2>{note}{body}"


def _budget(hybrid: Mapping[str, Any], rows: Mapping[str, Mapping[str, Any]]) -> str:
    """Each policy's peak spend in a month period against each monthly cap, whether the cap held it (only the
    forecast and reactive policies are held to caps; actual as recorded) and whether it stayed within it, and the
    value-aware ratio."""
    capped = {name: row["monthly_caps"] for name, row in rows.items() if row.get("monthly_caps")}
    if not capped:
        return ""
    body = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{html.escape(budget)}</td><td>{cap['cap_usd']:,.0f}</td>"
        f"<td>{cap['peak_spent_usd']:,.0f}</td><td>{_held_to_cap(cap)}</td>"
        f"<td>{'yes' if cap['within_cap'] else 'NO'}</td>"
        f"<td>{rows[name].get('hard_stop_released_units', 0)}</td></tr>"
        for name, caps in capped.items()
        for budget, cap in caps.items()
    )
    head = (
        "<tr><th>policy</th><th>budget</th><th>monthly cap (USD)</th><th>peak spend (USD)</th>"
        "<th>held to the cap</th><th>within the cap</th><th>units released by a hard stop</th></tr>"
    )
    ratio = hybrid.get("avoided_waiting_cost_forecast_over_reactive")
    note = (
        f"<p class='note'>Avoided waiting cost, forecast over reactive burst under the same caps: {ratio:.3f}x.</p>"
        if ratio is not None
        else ""
    )
    held = (
        "<p class='note'>Held to the cap: the forecast and reactive policies are; static and oracle run as if no "
        "cap were set, and are within it only by their own spend; actual is what the cluster did, under whatever "
        "caps it enforced (as recorded).</p>"
    )
    return f"<table>{head}{body}</table>{held}{note}"


def _held_to_cap(cap: Mapping[str, Any]) -> str:
    """yes or no; the actual row ran under whatever caps the cluster enforced: as recorded."""
    if cap.get("as_recorded"):
        return "as recorded"
    return "yes" if cap["held_to_cap"] else "no"


def _avoided_per_class(rows: Mapping[str, Mapping[str, Any]]) -> str:
    priced = {
        n: r["avoided_waiting_cost_by_class_usd"] for n, r in rows.items() if r.get("avoided_waiting_cost_by_class_usd")
    }
    if not priced:
        return ""
    classes = sorted({c for values in priced.values() for c in values})
    head = "<tr><th>demand class</th>" + "".join(f"<th>{html.escape(n)}</th>" for n in priced) + "</tr>"
    body = "".join(
        f"<tr><td>{html.escape(c)}</td>" + "".join(f"<td>{v[c]:,.0f}</td>" for v in priced.values()) + "</tr>"
        for c in classes
    )
    note = "<p class='note'>Per demand class: avoided waiting cost (USD) against the on-prem-only baseline.</p>"
    return f"{note}<table>{head}{body}</table>"


def _overview(hybrid: Mapping[str, Any], rows: Mapping[str, Mapping[str, Any]]) -> str:
    burst = list(hybrid["burst_pools"])
    head = "<tr><th>policy</th><th>queued accelerator-hours</th><th>avoided</th><th>on-prem utilization</th>"
    head += "".join(f"<th>{html.escape(p)} (USD)</th>" for p in burst)
    head += "<th>burst spend (USD)</th><th>USD per avoided queued accelerator-hour</th>"
    priced = all(row.get("waiting_cost_usd") is not None for row in rows.values())
    head += "<th>waiting cost (USD)</th><th>avoided waiting cost (USD)</th></tr>" if priced else "</tr>"
    body = []
    for name, row in rows.items():
        spend = row.get("burst_spend_by_pool_usd", {})
        cells = "".join(f"<td>{spend[p]:,.0f}</td>" if p in spend else "<td>0</td>" for p in burst)
        per_hour = row.get("usd_per_avoided_queued_accelerator_hour")
        body.append(
            f"<tr><td>{html.escape(name)}</td><td>{row['queued_accelerator_hours']:,.1f}</td>"
            f"<td>{row.get('avoided_queued_accelerator_hours', 0.0):,.1f}</td>"
            f"<td>{_percent(row['onprem_utilization'])}</td>{cells}"
            f"<td>{row.get('burst_spend_usd', 0.0):,.0f}</td>"
            f"<td>{f'{per_hour:,.2f}' if per_hour is not None else '—'}</td>{_waiting(row) if priced else ''}</tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def _per_class(rows: Mapping[str, Mapping[str, Any]]) -> str:
    names = list(rows)
    classes = sorted({c for row in rows.values() for c in row["queued_accelerator_hours_by_class"]})
    head = "<tr><th>demand class</th>" + "".join(f"<th>{html.escape(n)}</th>" for n in names) + "</tr>"
    body = []
    for name in classes:
        cells = "".join(
            f"<td>{rows[n]['queued_accelerator_hours_by_class'][name]:,.1f} "
            f"({rows[n]['hours_with_queue_by_class'][name]:,.1f} h)</td>"
            for n in names
        )
        body.append(f"<tr><td>{html.escape(name)}</td>{cells}</tr>")
    note = "<p class='note'>Per demand class: queued accelerator-hours (hours in which some of its demand waited).</p>"
    return f"{note}<table>{head}{''.join(body)}</table>"


def _waiting(row: Mapping[str, Any]) -> str:
    avoided = row.get("avoided_waiting_cost_usd")
    return f"<td>{row['waiting_cost_usd']:,.0f}</td><td>{f'{avoided:,.0f}' if avoided is not None else '—'}</td>"


def _percent(value: float | None) -> str:
    return f"{value:.1%}" if value is not None else "—"
