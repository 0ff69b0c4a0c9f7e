"""What running an accelerator draws from the grid, for the energy and carbon figures of the reports.

Energy of a policy = accelerator-hours paid x watts per chip x PUE; carbon = energy x the grid's intensity. Paid
accelerators count whether busy or idle: an idle chip still draws most of its power and its share of the site's.
The defaults are public reference figures (NVIDIA A100 SXM board power 400 W; Google's reported fleet-wide PUE
of 1.10; a grid of 400 gCO2e/kWh); set them for your hardware, site and region.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pydantic import ConfigDict, Field

from config.fields import NumbersOnly
from models import ConfigProblem


class EnergySettings(NumbersOnly):
    model_config = ConfigDict(extra="forbid", frozen=True)

    watts_per_chip: float = Field(default=400.0, gt=0.0, le=5_000.0)
    pool_watts_per_chip: dict[str, float] = Field(default_factory=dict)
    pue: float = Field(default=1.1, ge=1.0, le=3.0)
    grid_gco2e_per_kwh: float = Field(default=400.0, ge=0.0, le=2_000.0)

    def watts(self, pool_id: str) -> float:
        return self.pool_watts_per_chip.get(pool_id, self.watts_per_chip)


def energy_problems(settings: EnergySettings, pool_ids: Iterable[str]) -> Iterator[ConfigProblem]:
    known = set(pool_ids)
    for pool_id, watts in settings.pool_watts_per_chip.items():
        if pool_id not in known:
            listed = ", ".join(sorted(known)) or "none"
            yield ConfigProblem(f"energy.pool_watts_per_chip.{pool_id}", f"unknown pool {pool_id!r} (known: {listed})")
        elif not 0.0 < watts <= 5_000.0:
            yield ConfigProblem(
                f"energy.pool_watts_per_chip.{pool_id}", f"watts per chip must be in (0, 5000], got {watts}"
            )
