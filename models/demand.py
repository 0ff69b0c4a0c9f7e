"""Demand classes: streams of work with the same accelerator needs."""

from __future__ import annotations

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
