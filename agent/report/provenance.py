"""What a simulation report was made of and by: the leadtime version and when the page was generated, the trace,
window and configuration, each pool's price and the settings the forecast and reactive policies ran at; and the
words for a pool's accelerators (GPUs for a GPU pool, chips for a TPU one)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from agent.report.fleet import MAX_PANELS
from config.durations import format_duration
from models import AcceleratorFamily, PoolSpec

UNIT_NAMES = {AcceleratorFamily.GPU: ("GPU", "GPUs"), AcceleratorFamily.TPU: ("chip", "chips")}


def unit_name(family: AcceleratorFamily, plural: bool = True) -> str:
    """What one accelerator of ``family`` is called in the report: a GPU, or a (TPU) chip."""
    return UNIT_NAMES.get(family, ("accelerator", "accelerators"))[plural]


def accelerator_hours_note(pools: Sequence[PoolSpec]) -> str:
    """One sentence saying what an accelerator-hour is for this fleet."""
    families = {p.family for p in pools}
    kinds = " or ".join(f"{unit_name(f, plural=False)}-hour" for f in sorted(families))
    return f"An accelerator-hour is one accelerator for one hour: here a {kinds or 'chip-hour'}."


def provenance_section(document: Mapping[str, Any], pools: Sequence[PoolSpec], generated_at: datetime) -> str:
    """The trace, window and configuration simulated, the version and time of the run, and each pool's price."""
    w, t = document["window"], document["trace"]
    run = (
        f"Trace {t['path']} ({len(t['series'])} demand classes, {t['step_s'] // 60}-minute steps), window "
        f"{w['start']} to {w['end']} ({w['steps']:,} steps, {w['gap_steps']:,} gap steps not counted); config "
        f"{document['config']['path']}."
    )
    made = (
        f"leadtime {document.get('leadtime_version', 'unknown')}; report generated {generated_at:%Y-%m-%d %H:%M} UTC."
    )
    settings = [f"forecast policy at {service_levels_text(document.get('forecast_service_levels'))}"]
    planner = document["config"]["settings"].get("planner") or {}
    if "reactive" in document["policies"]:
        settings.append(f"reactive with headroom {planner.get('headroom_units', 0)} units per pool")
    return (
        f"<section id='provenance'><h2>What was simulated</h2><p>{html.escape(run)} "
        f"As run: {html.escape('; '.join(settings))}. {html.escape(made)}</p>{pools_table(pools)}</section>"
    )


def service_levels_text(levels: Mapping[str, float] | None) -> str:
    """The forecast policy's service level as run: one figure when every class had it, else the range."""
    if not levels:
        return "its configured service level"
    values = sorted(set(levels.values()))
    if len(values) == 1:
        return f"service level {values[0]:g} (every demand class)"
    return f"service levels {values[0]:g} to {values[-1]:g} (by demand class; per class in results.json)"


def pools_table(pools: Sequence[PoolSpec], limit: int = MAX_PANELS) -> str:
    """Pools alike in kind, tier, accelerators, size, price and lead time on one row: the price per accelerator-hour
    (GPU-hour or chip-hour) and per unit-hour each pool was billed at."""
    groups: dict[tuple[Any, ...], list[PoolSpec]] = {}
    for p in pools:
        key = (p.kind, p.tier, p.family, p.chips_per_unit, p.price_per_unit_hour_usd, p.lead_time)
        groups.setdefault(key, []).append(p)
    head = (
        "<tr><th>pools</th><th>kind, tier</th><th>accelerators per unit</th><th>USD per accelerator-hour</th>"
        "<th>USD per unit-hour</th><th>lead time</th></tr>"
    )
    rows = []
    for members in list(groups.values())[:limit]:
        p = members[0]
        names = ", ".join(m.pool_id for m in members[:3]) + (
            f" and {len(members) - 3} more" if len(members) > 3 else ""
        )
        one = unit_name(p.family, plural=False)
        rows.append(
            f"<tr><td>{html.escape(names)}</td><td>{html.escape(f'{p.kind.value}, {p.tier.value}')}</td>"
            f"<td>{p.chips_per_unit} {unit_name(p.family, p.chips_per_unit != 1)}</td>"
            f"<td>{p.price_per_chip_hour_usd:,.2f} per {one}-hour</td><td>{p.price_per_unit_hour_usd:,.2f}</td>"
            f"<td>{html.escape(format_duration(p.lead_time))}</td></tr>"
        )
    rest = len(groups) - limit
    more = (
        f"<p class='note'>{rest} more groups of pools: every pool's price is in results.json "
        "(config.settings.pools).</p>"
        if rest > 0
        else ""
    )
    return f"<table class='pools'>{head}{''.join(rows)}</table>{more}"
