"""The hybrid section's on-prem utilization of the ``actual`` row divides by the on-prem units its pools were
recorded to have, not by their max_units: on the hand-made trace of ``test_report_actual_row``, one of two on-prem
nodes was down for two hours."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.simulation.hybrid import hybrid_summary
from tests.test_report_actual_row import _actual, _scenario


def test_on_prem_utilization_of_the_actual_row_divides_by_the_recorded_units(tmp_path: Path) -> None:
    settings, window = _scenario(tmp_path)
    run = _actual(settings, window)
    row = hybrid_summary(settings.pool_specs(), window, {"actual": run})["rows"]["actual"]
    # On-prem serves min(demand, recorded chips) at steps 0, 1, 2, 3, 5: 10 + 8 + 8 + 16 + 16 = 58 chip-hours,
    # of 16 + 8 + 8 + 16 + 16 = 64 held (max_units would be 80).
    assert row["onprem_utilization"] == pytest.approx(58 / 64)
