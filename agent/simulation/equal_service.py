"""What the same service costs: each policy tuned to leave a target fraction of demand unserved.

The reactive policy gets the smallest constant headroom (extra units per pool) that meets the target; the
forecast policy the lowest service level (forecast quantile) that meets it. Costs are interpolated linearly in
the unserved fraction between the two nearest settings that bracket the target. Every trial replays the
session's outlooks, so a trial costs planning and the simulated cluster only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.simulation.runner import PolicyRun, Simulation

TARGETS = (0.005, 0.001)
SERVICE_LEVELS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999)
MAX_HEADROOM = 64


@dataclass(frozen=True)
class Trial:
    setting: float
    cost_usd: float
    unserved_fraction: float


Evaluate = Callable[[float], Trial]


def equal_service(
    session: Simulation,
    targets: Sequence[float] = TARGETS,
    known: Mapping[str, PolicyRun] | None = None,
    on_done: Callable[[str], object] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """``equal_service[target][policy]`` with ``cost_usd``, ``unserved_fraction`` and the bracketing settings.

    The session should have been created with ``extra_quantiles=SERVICE_LEVELS`` so that every service level
    tried has its forecast quantile.
    """
    known = known or {}
    trials = {
        "reactive": _search_headroom(session, tuple(targets), _seed(known, "reactive")),
        "forecast": _search_levels(session, tuple(targets)),
    }
    if on_done is not None:
        for name in trials:
            on_done(name)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for target in targets:
        key = f"{target:g}"
        out[key] = {name: interpolate(found, target, _SETTING_NAMES[name]) for name, found in trials.items()}
        if "oracle" in known:
            oracle = known["oracle"]
            out[key]["oracle"] = {"cost_usd": round(oracle.cost_usd, 2), "unserved_fraction": oracle.unserved_fraction}
    return out


_SETTING_NAMES = {"reactive": "headroom_units", "forecast": "service_level"}


def interpolate(trials: Sequence[Trial], target: float, setting_name: str) -> dict[str, Any]:
    """Cost at ``target`` from the nearest failing and passing trials; unbracketed cases say so."""
    passing = sorted((t for t in trials if t.unserved_fraction <= target), key=lambda t: t.cost_usd)
    failing = [t for t in trials if t.unserved_fraction > target]
    if not passing:
        best = min(trials, key=lambda t: t.unserved_fraction)
        return {
            "cost_usd": None,
            "unserved_fraction": best.unserved_fraction,
            setting_name: None,
            "note": f"no {setting_name} tried reached the target",
        }
    upper = passing[0]
    lower_candidates = [t for t in failing if t.cost_usd <= upper.cost_usd]
    if not lower_candidates:
        return {
            "cost_usd": round(upper.cost_usd, 2),
            "unserved_fraction": upper.unserved_fraction,
            setting_name: [upper.setting],
            "note": "the cheapest setting already meets the target",
        }
    lower = max(lower_candidates, key=lambda t: t.cost_usd)
    share = (lower.unserved_fraction - target) / (lower.unserved_fraction - upper.unserved_fraction)
    cost = lower.cost_usd + share * (upper.cost_usd - lower.cost_usd)
    return {"cost_usd": round(cost, 2), "unserved_fraction": target, setting_name: [lower.setting, upper.setting]}


def _seed(known: Mapping[str, PolicyRun], name: str) -> Trial | None:
    run = known.get(name)
    return None if run is None else Trial(0.0, run.cost_usd, run.unserved_fraction)


def _search_headroom(session: Simulation, targets: tuple[float, ...], seed: Trial | None) -> list[Trial]:
    def evaluate(headroom: float) -> Trial:
        planner = session.settings.planner.model_copy(update={"headroom_units": int(headroom)})
        run = session.run("reactive", planner)
        return Trial(headroom, run.cost_usd, run.unserved_fraction)

    cache: dict[float, Trial] = {0.0: seed} if seed is not None else {}

    def trial(h: float) -> Trial:
        if h not in cache:
            cache[h] = evaluate(h)
        return cache[h]

    for target in sorted(targets, reverse=True):
        low, high = 0, 1
        if trial(0).unserved_fraction <= target:
            continue
        while trial(high).unserved_fraction > target and high < MAX_HEADROOM:
            low, high = high, high * 2
        _bisect(trial, target, low, high)
    return list(cache.values())


def _search_levels(session: Simulation, targets: tuple[float, ...]) -> list[Trial]:
    cache: dict[int, Trial] = {}

    def trial(i: int) -> Trial:
        if i not in cache:
            level = SERVICE_LEVELS[i]
            planner = session.settings.planner.model_copy(update={"service_level": level})
            run = session.run("forecast", planner)
            cache[i] = Trial(level, run.cost_usd, run.unserved_fraction)
        return cache[i]

    for target in sorted(targets, reverse=True):
        top = len(SERVICE_LEVELS) - 1
        if trial(top).unserved_fraction <= target:
            _bisect(trial, target, -1, top)
    return list(cache.values())


def _bisect(trial: Callable[[int], Trial], target: float, low: int, high: int) -> int:
    """Smallest setting in (low, high] that meets the target, given that ``high`` does and ``low`` does not
    (unserved demand falls as the setting grows); every setting tried is remembered by the caller."""
    while high - low > 1:
        mid = (low + high) // 2
        if trial(mid).unserved_fraction <= target:
            high = mid
        else:
            low = mid
    return high
