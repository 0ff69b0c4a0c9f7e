"""The forecast bands the simulation report draws per class: which forecast each step shows (``BandSpec``,
``band_leads``) and the recorder that keeps them as a policy runs (``BandRecorder``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from agent.loop import TickReport
from agent.simulation.window import SimulationWindow
from models import PoolKind, PoolSpec


@dataclass(frozen=True)
class BandSpec:
    """Which forecast the report's bands show per class: the one issued ``leads[class]`` steps before the step it
    is drawn at, from its median to the quantile at the class's service level ``levels[class]``."""

    leads: dict[str, int]
    levels: dict[str, float]


def band_leads(pools: Sequence[PoolSpec], step: timedelta) -> dict[str, int]:
    """Per class, the steps from a decision to the first step the capacity it asks for can serve: the longest lead
    time among the pools that serve the class and can be scaled, in steps (0 for a class on on-prem pools only)."""
    leads: dict[str, int] = {}
    for pool in pools:
        lead = math.ceil(pool.lead_time / step) if pool.kind is not PoolKind.ON_PREM else 0
        for name in pool.serves:
            leads[name] = max(leads.get(name, 0), lead)
    return leads


class BandRecorder:
    """Keeps, per class and step, the forecast median and the quantile at the class's service level that the agent
    issued one lead time before the step (``BandSpec``): the forecast its capacity for that step rested on. A
    forecast's first step is the one its tick serves, so the lead time ahead is its step ``lead``."""

    def __init__(self, window: SimulationWindow, spec: BandSpec) -> None:
        steps = len(window.index)
        self._spec = spec
        self._median = {c: np.full(steps, np.nan) for c in window.classes}
        self._upper = {c: np.full(steps, np.nan) for c in window.classes}
        self._any = False

    def record(self, t: int, report: TickReport) -> None:
        for name, forecast in report.forecasts.items():
            if name not in self._median or name not in self._spec.levels or forecast.horizon_steps == 0:
                continue
            ahead = min(self._spec.leads.get(name, 0), forecast.horizon_steps - 1)
            if t + ahead >= len(self._median[name]):
                continue
            self._median[name][t + ahead] = forecast.quantiles[forecast.level_at_or_above(0.5)][ahead]
            upper = forecast.level_at_or_above(self._spec.levels[name])
            self._upper[name][t + ahead] = forecast.quantiles[upper][ahead]
            self._any = True

    def result(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        if not self._any:
            return {}
        return {c: (self._median[c], self._upper[c]) for c in self._median}
