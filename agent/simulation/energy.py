"""Energy and carbon of a policy run: the accelerator-hours it paid for, per pool, at the configured watts per
chip, times the site's PUE, times the grid's carbon intensity (``config.energy``). Gap steps are not counted,
as for cost; the idle part is the share of paid accelerator-hours that served no demand."""

from __future__ import annotations

from agent.simulation.runner import PolicyRun
from agent.simulation.window import SimulationWindow
from config.schema import Settings


def energy_summary(settings: Settings, window: SimulationWindow, run: PolicyRun) -> dict[str, float]:
    energy = settings.energy
    hours = window.step.total_seconds() / 3600.0
    observed = window.observed
    kwh = 0.0
    for pool in settings.pool_specs():
        paid = run.paid_units.get(pool.pool_id)
        if paid is None or len(paid) != len(observed):
            continue
        chip_hours = float(paid[observed].sum()) * pool.chips_per_unit * hours
        kwh += chip_hours * energy.watts(pool.pool_id) / 1000.0 * energy.pue
    idle_kwh = kwh * (1.0 - run.utilization) if run.accelerator_hours > 0 else 0.0
    return {
        "energy_kwh": round(kwh, 1),
        "idle_energy_kwh": round(idle_kwh, 1),
        "carbon_kg_co2e": round(kwh * energy.grid_gco2e_per_kwh / 1000.0, 1),
    }
