"""The headline of a simulation: what the forecast policy's service costs against each other way of running the
cluster (reactive, static, the oracle and, replayed from Prometheus, what actually ran), in USD and percent,
with each one's unserved demand beside it.

Where an equal-service comparison was made, the forecast and reactive policies are compared at its first
(loosest) target, each tuned to leave the same share of demand unserved, save one whose cheapest setting tried
already leaves less unserved than the target: its figure is that run's, at its own share, and its ``basis`` says
so. Static, oracle and actual cannot be tuned and are shown as they ran, with their own unserved share. Without
one, every policy is shown as it ran. Each row says whether its unserved share is the forecast figure's
(``same_service``): a saving against a row that left more or less demand unserved compares costs of different
service, and the report marks it and gives the row's share.

With budgets configured, the forecast and reactive runs are held to their caps and static and oracle are not: each
figure says whether it was (``held_to_budgets``). Actual is neither: it is what the cluster did, under whatever
caps it enforced (its own agent's, perhaps), so it is held to them as recorded (``budgets_as_recorded``). For a
held one, the steps at which a cap held the run as configured back (``budget_held_steps``: a target cut or a
scale-up trimmed, demand paced in part, a release forced) and its budget alerts that stopped, trimmed or deferred
scale-ups (``budget_alerts``); for a figure tuned to equal service, the most steps at which a cap held back one of
the trials it rests on, since the run as configured is not the one it shows. A saving against a run not held to
the caps (not actual), while a cap held the forecast run back, is partly the cap's: it bought less.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

BASELINES = ("reactive", "static", "oracle", "actual")
HELD_TO_BUDGETS = ("forecast", "reactive")  # the runner holds these to the caps (``agent.simulation.runner``)
AS_RECORDED = "actual"  # replayed: held to whatever caps the cluster enforced, as recorded
# The alerts of a cap that held a run back: scale-ups stopped by a projected overspend, trimmed by a shared
# budget's reservation, a hard stop put off.
BINDING_ALERTS = ("projected-overspend", "budget-reservation-refused", "budget-hard-stop-deferred")
# Two unserved shares that read the same at this many decimals of a percent, as the report shows them, are the same
# service (two figures tuned to one target, both interpolated at it): a mark beside two equal shares would say the
# service differs where the reader sees none (0.086% and 0.094%, both 0.09%, were marked).
SHOWN_DECIMALS = 2


def same_service(unserved: float, other: float) -> bool:
    """Whether two unserved shares (fractions of demand) are the same service: the same as the report shows them."""
    return _shown(unserved) == _shown(other)


def _shown(share: float) -> str:
    return f"{max(share, 0.0):.{SHOWN_DECIMALS}%}"  # never negative: a -0.00% from rounding noise is 0.00%


def headline(document: Mapping[str, Any]) -> dict[str, Any] | None:
    policies: Mapping[str, Mapping[str, Any]] = document["policies"]
    if "forecast" not in policies:
        return None
    comparison: Mapping[str, Mapping[str, Mapping[str, Any]]] = document.get("equal_service") or {}
    target, tuned = _first_reached(comparison)
    forecast = _point(tuned["forecast"], _tuned_basis(tuned["forecast"], target)) if target is not None else None
    forecast = forecast or _point(policies["forecast"], "as run")
    rows = []
    for name in BASELINES:
        trials = None
        if target is not None and name in tuned and name != "oracle":
            row = _point(tuned[name], _tuned_basis(tuned[name], target))
            trials = tuned[name].get("trials")
        elif name in policies:
            row = _point(policies[name], "as run")
        else:
            continue
        row.update(_budgets(document, name, trials))
        saving = row["cost_usd"] - forecast["cost_usd"]
        row.update(
            policy=name,
            same_service=same_service(row["unserved_fraction"], forecast["unserved_fraction"]),
            forecast_saves_usd=round(saving, 2),
            forecast_saves_percent=round(100.0 * saving / row["cost_usd"], 2) if row["cost_usd"] else None,
        )
        rows.append(row)
    forecast.update(_budgets(document, "forecast", tuned["forecast"].get("trials") if target is not None else None))
    return {"forecast": forecast, "against": rows, "target_unserved": target}


def _budgets(
    document: Mapping[str, Any], policy: str, trials: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """Whether ``policy`` was held to the budget caps (none configured: False; the actual row: as recorded) and, if
    so, whether a cap held it back: the steps and alerts of its run as configured, or, for a figure tuned to equal
    service, the most steps of the ``trials`` it rests on (``budget_held_from``: "trials"), its run as configured's
    alerts kept apart (``configured_budget_alerts``), since that run is not the one the figure shows."""
    budgets = document.get("config", {}).get("settings", {}).get("budgets") or ()
    if budgets and policy == AS_RECORDED:
        return {"held_to_budgets": False, "budgets_as_recorded": True}
    if not budgets or policy not in HELD_TO_BUDGETS:
        return {"held_to_budgets": False}
    run = document["policies"].get(policy, {})
    alerts = [a for a in run.get("alerts_raised") or () if a["kind"] in BINDING_ALERTS]
    if trials:
        steps = max(int(t.get("budget_held_steps", 0)) for t in trials)
        return {
            "held_to_budgets": True,
            "budget_held_steps": steps,
            "budget_held_from": "trials",
            "configured_budget_alerts": alerts,
        }
    return {"held_to_budgets": True, "budget_held_steps": int(run.get("budget_held_steps", 0)), "budget_alerts": alerts}


def _first_reached(
    comparison: Mapping[str, Mapping[str, Mapping[str, Any]]],
) -> tuple[float | None, Mapping[str, Mapping[str, Any]]]:
    for key, row in comparison.items():
        if all(row.get(p, {}).get("cost_usd") is not None for p in ("forecast", "reactive")):
            return float(key), row
    return None, {}


def _tuned_basis(row: Mapping[str, Any], target: float) -> str:
    """What a tuned figure rests on: equal service at the target, or, where even the cheapest setting tried left
    less unserved than the target (the search's note), that run's own share, below the target."""
    if "note" in row:
        return f"its own {float(row['unserved_fraction']):.2%} unserved (below the {target:.1%} target)"
    return f"equal service at {target:.1%} unserved"


def _point(row: Mapping[str, Any], basis: str) -> dict[str, Any]:
    point = {"cost_usd": float(row["cost_usd"]), "unserved_fraction": float(row["unserved_fraction"]), "basis": basis}
    if "note" in row:  # "the cheapest setting already meets the target": below the target, not at it
        point["note"] = row["note"]
    return point
