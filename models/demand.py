"""Demand classes: streams of work with the same accelerator needs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class AcceleratorFamily(StrEnum):
    """Which kind of chip a demand class needs. TPU demand is only served by TPU pools."""

    GPU = "gpu"
    TPU = "tpu"


@dataclass(frozen=True)
class DemandClass:
    """A stream of work measured in accelerator units demanded (running + queued requests).

    ``waiting_cost_per_accelerator_hour`` prices an accelerator-hour of demand that waits for capacity; with the
    unit price it sets the forecast quantile to provision for (newsvendor critical ratio). ``service_level``,
    when set, overrides that with a fixed quantile.
    """

    name: str
    family: AcceleratorFamily = AcceleratorFamily.GPU
    series: str | None = None
    waiting_cost_per_accelerator_hour: float | None = None
    service_level: float | None = None

    @property
    def series_id(self) -> str:
        """The name of this class's demand series in a metric source (defaults to the class name)."""
        return self.series or self.name


# Demand is counted in accelerators. No fleet comes near a billion of them, so a larger value is a broken exporter
# or query (a counter read as a gauge, a unit mix-up), never a reading to plan on.
MAX_DEMAND = 1e9


def implausible_demand(value: float) -> str:
    """Why ``value`` cannot be a demand reading (negative, infinite or absurdly large), or ``""`` when it can.

    NaN is not judged here: it is a missing value, which callers already treat as missing.
    """
    if math.isnan(value):
        return ""
    if math.isinf(value):
        return f"demand {value} is infinite"
    if value < 0:
        return f"demand {value:g} is negative"
    if value > MAX_DEMAND:
        return f"demand {value:g} is above {MAX_DEMAND:g} accelerators, not a plausible reading"
    return ""
