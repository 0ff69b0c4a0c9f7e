"""The reports of ``leadtime recommend``: ``report.md`` (tables) and ``report.html`` (the same, with charts of each
class's recent demand and forecast bands, and of each pool's current against recommended units)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from agent.loop import TickReport
from agent.report.charts import figure_to_data_uri
from agent.report.simulation import STYLE
from config.durations import format_duration
from forecasting.series import series_arrays

SHOWN_HISTORY_STEPS = 72  # six hours at 5 minutes: enough context, and the short horizon stays visible


def write_recommendation_reports(
    out: Path, document: Mapping[str, Any], history: pd.DataFrame, tick: TickReport
) -> None:
    (out / "report.md").write_text(markdown(document), encoding="utf-8")
    charts = [
        ("Current and recommended units per pool", pool_chart(document["pools"])),
        ("Recent demand and forecast per demand class", forecast_chart(history, tick)),
    ]
    body = [f"<h1>leadtime recommendation</h1><p>{html.escape(_intro(document))}</p>"]
    if document.get("warnings"):
        items = "".join(f"<li>{html.escape(w)}</li>" for w in document["warnings"])
        body.append(f"<h2>Warnings</h2><ul>{items}</ul>")
    for title, rows in _tables(document):
        body.append(f"<h2>{html.escape(title)}</h2>{_html_table(rows)}")
    for title, uri in charts:
        body.append(f'<h2>{html.escape(title)}</h2><img alt="{html.escape(title)}" src="{uri}">')
    page = "<!doctype html><html><head><meta charset='utf-8'><title>leadtime recommendation</title>"
    page += f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    (out / "report.html").write_text(page, encoding="utf-8")


def markdown(document: Mapping[str, Any]) -> str:
    lines = ["# leadtime recommendation", "", _intro(document), ""]
    if document.get("warnings"):
        lines += ["## Warnings", "", *(f"- {w}" for w in document["warnings"]), ""]
    for title, rows in _tables(document):
        lines += [f"## {title}", ""]
        if not rows:
            lines += ["(none)", ""]
            continue
        head = list(rows[0])
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join(" --- " for _ in head) + "|")
        lines += ["| " + " | ".join(_cell(row[k]).replace("|", "\\|") for k in head) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


def _intro(document: Mapping[str, Any]) -> str:
    cost = document["cost"]
    change = cost["change_per_day_usd"]
    verdict = f"saves {-change:,.2f} USD/day" if change < 0 else f"costs {change:,.2f} USD/day more"
    return (
        f"Dry run at {document['at']} from {document['prometheus']} (pool state: {document['pool_state_source']}). "
        f"Nothing was changed. Current capacity costs {cost['current_per_day_usd']:,.2f} USD/day; the "
        f"recommendation {verdict} ({cost['recommended_per_day_usd']:,.2f} USD/day)."
        + (
            f" It would save a further {cost['releasable_once_idle_per_day_usd']:,.2f} USD/day once the units the "
            "forecast would release are seen idle for the idle hold (one instant cannot see that; the daemon in "
            "dry-run mode watches)."
            if cost.get("releasable_once_idle_per_day_usd")
            else ""
        )
        + (f" Budgets: {document['ledger']['note']}." if document.get("budgets") and "ledger" in document else "")
    )


def _tables(document: Mapping[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    pools = [
        {
            "pool": p["pool_id"],
            "current units": p["current_units"],
            "recommended units": p["recommended_units"],
            "action": p["action"],
            "why": p.get("why", p["reason"]),
            "USD/day now": p["current_cost_per_day_usd"],
            "USD/day recommended": p["recommended_cost_per_day_usd"],
            "releasable once idle (units)": p.get("releasable_once_idle_units", 0),
        }
        for p in document["pools"]
    ]
    zones = [
        {
            "pool": p["pool_id"],
            "zone": z["zone"],
            "ready units": z["ready_units"],
            "target units": z["target_units"],
            "failed units": z["failed_units"],
            "out of capacity until": z["backoff_until"] or "",
        }
        for p in document["pools"]
        for z in p.get("zones", [])
    ]
    classes = [
        {
            "demand class": c["name"],
            "observed": c["observed"] if c["observed"] is not None else "no data",
            "lead time": format_duration(timedelta(seconds=c["lead_time_s"])) if c["lead_time_s"] else "-",
            "service level": c["service_level"],
            **_peaks(c["forecast"]),
            "model": c["model"] or "-",
            "problem": c["problem"] or "",
        }
        for c in document["classes"]
    ]
    groups = [
        {
            "demand group": g["name"],
            "classes": ", ".join(g["members"]),
            "service level": g["service_level"],
            **_peaks(g["forecast"]),
        }
        for g in document.get("groups", [])
    ]
    budgets = [
        {
            "budget": b["name"],
            "spent this period": _spent(b),
            "USD/h now": b["current_per_hour_usd"],
            "USD/h recommended": b["recommended_per_hour_usd"],
            "projected period end (now)": b["current_projected_period_usd"],
            "projected period end (recommended)": b["recommended_projected_period_usd"],
            "monthly cap": b["monthly_cap_usd"],
            "share of monthly cap": b.get("recommended_fraction_of_monthly_cap"),
            "projected hour (recommended)": b["recommended_projected_hour_usd"],
            "hourly cap": b["hourly_cap_usd"],
            "share of hourly cap": b.get("recommended_fraction_of_hourly_cap"),
        }
        for b in document["budgets"]
    ]
    quality = document.get("backtest", {})
    backtest_rows = [
        _backtest_row(
            g["demand_group"], f"summed demand of {len(g['members'])} classes: what their pools are sized on", g
        )
        for g in quality.get("groups", [])
    ] + [_backtest_row(q["demand_class"], _own_forecast(q), q) for q in quality.get("classes", [])]
    backtest_title = (
        f"Backtest of {quality.get('model', '?')} over the last day of history "
        f"(horizon {quality.get('horizon_steps', '?')} steps, an origin every hour)"
    )
    return [
        ("Pools", pools),
        *([("Zones of the pools that span zones", zones)] if zones else []),
        ("Demand classes", classes),
        *([("Demand classes planned together (on the forecast of their summed demand)", groups)] if groups else []),
        ("Budgets (projected: spent so far + the units held to the end of the period or hour)", budgets),
        (backtest_title, backtest_rows),
    ]


def _backtest_row(name: str, forecast: str, q: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "series": name,
        "forecast": forecast,
        "origins": q["origins"],
        "MAE": q["mae"],
        "persistence MAE": q["persistence_mae"],
        "skill": q["skill"],
        "service level": q["level"],
        "coverage of the service level (each step)": q["coverage"],
        "coverage of the peak quantile": q.get("peak_coverage"),
        "peak over (steps)": q.get("peak_steps"),
    }


def _own_forecast(quality: Mapping[str, Any]) -> str:
    """A class's row scores the class's own forecast; that is the one its pools are sized on only when no other
    class may use exactly the same pools, else they are sized on its group's summed demand (the group's row)."""
    planned_on = quality.get("planned_on", quality["demand_class"])
    if planned_on == quality["demand_class"]:
        return "the class's own forecast: what its pools are sized on"
    return f"the class's own forecast (its pools are sized on {planned_on})"


def _spent(budget: Mapping[str, Any]) -> object:
    """The period's spend so far, marked partial while the ledger holds some of the budget's pools only from after
    the period started (``spend_partial`` says since when and which: also under Warnings)."""
    if not budget["spend_known"]:
        return "unknown, assumed 0"
    if budget.get("spend_complete") is False:
        late = ", ".join(p["pool_id"] for p in budget["pools_recorded_late"])
        since = budget["spend_recorded_since"] or "no record"
        return f"{budget['spent_period_usd']} (partial: recorded whole since {since}; late: {late})"
    return budget["spent_period_usd"]


def _peaks(forecast: Mapping[str, Any] | None) -> dict[str, str]:
    """The peak the planner plans on (the quantile of the highest demand over the steps it looks at: the lead time
    and one tick), apart from the highest one-step quantile over the same steps, which is never above it."""
    if forecast is None:
        return {"planned peak by quantile": "-", "peak over": "-", "highest one-step quantile": "-"}
    steps = forecast["peak_steps"]
    return {
        "planned peak by quantile": _by_level(forecast["peak"]),
        "peak over": f"{steps} steps ({format_duration(timedelta(seconds=steps * forecast['step_s']))})",
        "highest one-step quantile": _by_level(forecast["per_step_max"]),
    }


def _by_level(values: Mapping[str, float]) -> str:
    return ", ".join(f"q{level}: {value:.1f}" for level, value in values.items()) or "-"


def _html_table(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "<p class='note'>(none)</p>"
    head = "".join(f"<th>{html.escape(k)}</th>" for k in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row.values()) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return str(value)


def pool_chart(pools: Sequence[Mapping[str, Any]]) -> str:
    figure, ax = plt.subplots(figsize=(8, 0.6 + 0.5 * len(pools)))
    names = [p["pool_id"] for p in pools]
    y = np.arange(len(names))
    ax.barh(y - 0.2, [p["current_units"] or 0 for p in pools], height=0.4, color="#7f7f7f", label="current")
    ax.barh(y + 0.2, [p["recommended_units"] or 0 for p in pools], height=0.4, color="#1f77b4", label="recommended")
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("units", fontsize=8)
    ax.legend(fontsize=8, frameon=False)
    figure.tight_layout()
    return figure_to_data_uri(figure)


def forecast_chart(history: pd.DataFrame, tick: TickReport, columns: int = 3) -> str:
    series = series_arrays(history) if not history.empty else {}
    names = sorted(set(series) | set(tick.forecasts))
    rows = max(1, -(-len(names) // columns))
    figure, axes = plt.subplots(rows, columns, figsize=(4.5 * columns, 2.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        if name in series:
            stamps, values = series[name]
            ax.plot(stamps[-SHOWN_HISTORY_STEPS:], values[-SHOWN_HISTORY_STEPS:], color="black", linewidth=0.7)
        forecast = tick.forecasts.get(name)
        if forecast is not None:
            steps = pd.date_range(
                forecast.issued_at + forecast.step, periods=forecast.horizon_steps, freq=forecast.step
            )
            levels = sorted(forecast.quantiles)
            ax.fill_between(
                steps, forecast.quantiles[levels[0]], forecast.quantiles[levels[-1]], color="#9ecae1", step="post"
            )
            ax.step(
                steps, forecast.quantiles[forecast.level_at_or_above(0.5)], where="post", color="#1f77b4", linewidth=0.9
            )
        ax.set_title(name if forecast is not None else f"{name} (no forecast: holding)", fontsize=8)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    figure.autofmt_xdate()
    figure.tight_layout()
    return figure_to_data_uri(figure)
