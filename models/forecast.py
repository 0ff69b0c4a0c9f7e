"""Forecasts of accelerator demand, as quantiles over the provisioning horizon."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from itertools import pairwise


@dataclass(frozen=True)
class DemandForecast:
    """Quantile forecasts of one demand class, step by step over the horizon.

    ``quantiles`` maps a quantile level (e.g. 0.9) to one value per step; step ``i`` covers the interval
    starting at ``issued_at + (i + 1) * step``. ``last_observed`` is the newest trustworthy observation and
    ``model`` names the model that actually produced the numbers (a fallback names itself and says why in
    ``note``).

    ``peaks``, when the forecaster publishes them, maps a level to the calibrated quantile of the *highest* demand
    over the first ``i + 1`` steps, per ``i``: the quantile of a path's maximum, which is above the highest of the
    per-step quantiles (those hold one step at a time, not all at once).
    """

    demand_class: str
    issued_at: datetime
    step: timedelta
    quantiles: dict[float, tuple[float, ...]]
    last_observed: float
    model: str
    note: str = ""
    peaks: dict[float, tuple[float, ...]] = field(default_factory=dict)

    @property
    def horizon_steps(self) -> int:
        return len(next(iter(self.quantiles.values()))) if self.quantiles else 0

    def peak(self, level: float, steps: int | None = None) -> float:
        """The ``level`` quantile of the highest demand over the first ``steps`` steps (default: all).

        With published ``peaks`` that is their value (never below the highest per-step quantile); without, the
        highest per-step quantile stands in for it. The nearest available level at or above ``level`` is used, so
        asking for more protection never gives less. NaN when a figure read is not finite (``_peak_at``).
        """
        return self._peak_at(self.level_at_or_above(level), steps)

    def exceedance(self, demand: float, steps: int | None = None) -> float:
        """The forecast probability that demand exceeds ``demand`` at some step among the first ``steps``.

        Read off the peak quantiles of every level, linearly between two levels. Below the lowest level's peak it
        is at least ``1 - lowest`` and taken as that. Above the highest it falls off exponentially at the rate the
        two highest levels show (an exponential tail through both), so a service level equal to the highest
        forecast level still sees the chance shrink as demand rises; with no spread between levels the forecast
        claims no uncertainty, and the chance beyond it is zero.
        """
        points = sorted((self._peak_at(level, steps), level) for level in self.quantiles)
        if not points or any(math.isnan(value) for value, _ in points):
            return 1.0  # a level with a figure that is not finite says nothing: the demand is taken as likely
        if demand < points[0][0]:
            return 1.0 - points[0][1]
        for (low, q_low), (high, q_high) in pairwise(points):
            if low <= demand < high:
                return 1.0 - (q_low + (q_high - q_low) * (demand - low) / (high - low))
        top, q_top = points[-1]
        below = [(v, q) for v, q in points if v < top]
        if demand <= top or not below:
            return 1.0 - q_top if demand <= top else 0.0
        low, q_low = below[-1]
        rate = math.log((1.0 - q_low) / (1.0 - q_top)) / (top - low)
        return (1.0 - q_top) * math.exp(-rate * (demand - top))

    def _peak_at(self, chosen: float, steps: int | None) -> float:
        """NaN when any figure it reads (the level's steps, its published peak, or the last observation standing in
        for an empty horizon) is not finite: a NaN among the steps made ``max`` depend on where it stood (first: NaN,
        the other steps ignored; later: skipped) and an infinite step sized a pool to its ``max_units``. Callers
        take NaN as no forecast (``agent.planning.needs``)."""
        values = self.quantiles[chosen][: steps if steps is not None else None]
        if not values:
            return self.last_observed if math.isfinite(self.last_observed) else math.nan
        peaks = self.peaks.get(chosen, ())
        read = (*values, peaks[min(len(values), len(peaks)) - 1]) if peaks else values
        if not all(math.isfinite(v) for v in read):
            return math.nan
        return max(read)

    def level_at_or_above(self, level: float) -> float:
        levels = self._levels
        for candidate in levels:
            if candidate >= level - 1e-9:
                return candidate
        return levels[-1]

    @cached_property
    def _levels(self) -> tuple[float, ...]:
        """The levels in ascending order, sorted once per forecast: a replay asks for a level hundreds of thousands
        of times. Kept in the instance's ``__dict__`` (not a field): equality, ``repr`` and ``replace`` ignore it, a
        pickle carries it, and a forecast pickled before it existed works it out at its first use."""
        return tuple(sorted(self.quantiles))
