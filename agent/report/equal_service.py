"""The report's equal-service section: per unserved-demand target, what each policy's same service costs, with
the runs each figure rests on beside it (setting, cost, unserved share) and, where the cheapest setting tried
already meets the target, its own unserved share instead of the target's."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from agent.simulation.headline import same_service

ALREADY_MET = "the cheapest setting already meets the target"
POLICIES = ("forecast", "reactive", "oracle")
# Not at equal service: the two figures compared (a saving in the headline, a ratio here) leave different shares of
# demand unserved as the report shows them (``same_service``). One meaning wherever the mark stands: a figure below
# the target, the oracle as it ran, static or actual, each at its own share.
UNEQUAL_MARK = " ‡"


def equal_service_section(comparison: Mapping[str, Mapping[str, Mapping[str, Any]]] | None) -> str:
    """What the same service costs, per unserved-demand target, with the forecast policy's ratios."""
    if not comparison:
        return ""
    head = "<tr><th>unserved target</th><th>forecast (USD)</th><th>reactive (USD)</th><th>oracle (USD)</th>"
    head += "<th>forecast / reactive</th><th>forecast / oracle</th></tr>"
    rows = []
    marked = False
    for target, row in comparison.items():
        costs = {name: row.get(name, {}).get("cost_usd") for name in POLICIES}
        cells = "".join(_cell(name, row.get(name, {}), float(target)) for name in POLICIES)
        unequal = {base for base in ("reactive", "oracle") if costs["forecast"] and costs[base] and _unequal(row, base)}
        marked |= bool(unequal)
        ratios = "".join(
            f"<td>{costs['forecast'] / costs[base]:.3f}x{UNEQUAL_MARK if base in unequal else ''}</td>"
            if costs["forecast"] and costs[base]
            else "<td></td>"
            for base in ("reactive", "oracle")
        )
        rows.append(f"<tr><td>{float(target):.1%}</td>{cells}{ratios}</tr>")
    note = (
        "<p class='note'>Each policy tuned to leave the same share of demand unserved: the reactive policy with "
        "the smallest constant headroom (units per pool), the forecast policy with the lowest service level "
        "that meets the target, one for every demand class (in place of the classes' own levels and those from "
        "waiting costs); costs interpolated linearly in the unserved share between the two runs that "
        "bracket it, shown under each figure (setting: cost, unserved share). Where even the cheapest setting "
        "tried leaves less unserved than the target, the figure is that run's, at its own unserved share. The "
        "oracle is shown as it ran (perfect foresight), with the share of demand it left unserved.</p>"
    )
    if marked:
        note += (
            f"<p class='note'>{UNEQUAL_MARK.strip()} not at equal service: the two figures the ratio compares leave "
            "different shares of demand unserved (a figure below the target, its cheapest setting tried having "
            "already served more than the target, is at its own share, and the oracle at the share it left as it "
            "ran), so the ratio compares costs of different service.</p>"
        )
    return (
        f"<section id='equal-service'><h2>What the same service costs</h2>{note}"
        f"<table class='equal-service'>{head}{''.join(rows)}</table></section>"
    )


def _unequal(row: Mapping[str, Mapping[str, Any]], base: str) -> bool:
    """Whether the forecast figure and ``base``'s leave different shares of demand unserved, as shown (the headline's
    rule for its savings): a ratio between them compares costs of different service."""
    forecast, other = (row.get(name, {}).get("unserved_fraction") for name in ("forecast", base))
    return forecast is not None and other is not None and not same_service(float(forecast), float(other))


def _cell(policy: str, row: Mapping[str, Any], target: float) -> str:
    cost = row.get("cost_usd")
    figure = f"{cost:,.0f}" if cost is not None else "not reached" if row else "not run"
    if policy == "oracle":
        lines = [f"as run, {row['unserved_fraction']:.2%} unserved"] if row else []
    else:
        lines = basis_lines(row, target)
    more = "".join(f"<br><span class='note'>{html.escape(line)}</span>" for line in lines)
    return f"<td data-policy='{policy}'>{figure}{more}</td>"


def basis_lines(row: Mapping[str, Any], target: float) -> list[str]:
    """How a tuned figure was found, a line each: between which runs (setting: cost, unserved share), or why it
    is not at the target."""
    trials: Sequence[Mapping[str, Any]] = row.get("trials") or []
    runs = [_trial(t) for t in trials]
    if not row:
        return []
    if row.get("cost_usd") is None:
        return [f"no setting tried reached {target:.1%}; closest:", *runs]
    if row.get("note") == ALREADY_MET:
        share = row["unserved_fraction"]
        return [f"{share:.2%} unserved: below the {target:.1%} target", "already at the cheapest setting tried:", *runs]
    return ["interpolated between", *runs] if len(runs) == 2 else runs


def _trial(trial: Mapping[str, Any]) -> str:
    if "service_level" in trial:
        setting = f"service level {trial['service_level']:g}"
    elif "headroom_units" in trial:
        units = trial["headroom_units"]
        setting = f"headroom {units:g} unit{'' if units == 1 else 's'} per pool"
    else:
        setting = "run"
    held = (
        f", held back by a budget cap at {trial['budget_held_steps']:,} steps" if trial.get("budget_held_steps") else ""
    )
    return f"{setting}: {trial['cost_usd']:,.0f} USD, {trial['unserved_fraction']:.2%} unserved{held}"
