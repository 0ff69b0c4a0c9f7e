"""Forecasts of accelerator demand, as quantiles over the provisioning horizon."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class DemandForecast:
    """Quantile forecasts of one demand class, step by step over the horizon.

    ``quantiles`` maps a quantile level (e.g. 0.9) to one value per step; step ``i`` covers the interval
    starting at ``issued_at + (i + 1) * step``. ``last_observed`` is the newest trustworthy observation and
    ``model`` names the model that actually produced the numbers (a fallback names itself and says why in
    ``note``).
    """

    demand_class: str
    issued_at: datetime
    step: timedelta
    quantiles: dict[float, tuple[float, ...]]
    last_observed: float
    model: str
    note: str = ""

    @property
    def horizon_steps(self) -> int:
        return len(next(iter(self.quantiles.values()))) if self.quantiles else 0

    def peak(self, level: float, steps: int | None = None) -> float:
        """The highest value of the ``level`` quantile over the first ``steps`` steps (default: all).

        The nearest available level at or above ``level`` is used, so asking for more protection never gives
        less.
        """
        chosen = self.level_at_or_above(level)
        values = self.quantiles[chosen][: steps if steps is not None else None]
        return max(values) if values else self.last_observed

    def level_at_or_above(self, level: float) -> float:
        levels = sorted(self.quantiles)
        for candidate in levels:
            if candidate >= level - 1e-9:
                return candidate
        return levels[-1]
