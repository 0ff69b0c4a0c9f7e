"""The ``actual`` row bills an on-prem node that comes back (from maintenance, a repair) from the step it is
recorded, not from its pool's lead time before as if it had been bought: on the hand-made hybrid trace of
``test_report_actual_row`` (one of two on-prem nodes down at steps 1 and 2), with the on-prem pool given a 2 h
lead time and a price of 1 USD a chip-hour."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from config import settings_from_mapping
from tests.test_report_actual_row import ONPREM, _actual, _scenario


def _with_onprem(tmp_path: Path, lead: str) -> tuple[Any, Any]:
    settings, window = _scenario(tmp_path)
    raw = settings.model_dump(mode="json")
    pools = [dict(p) for p in raw["pools"]]
    pools[0]["lead_time"] = lead
    pools[0]["price_per_chip_hour_usd"] = 1.0
    return settings_from_mapping({"demand_classes": [{"name": "a"}], "pools": pools}), window


def test_an_onprem_node_back_from_maintenance_is_not_billed_before_it_returns(tmp_path: Path) -> None:
    settings, window = _with_onprem(tmp_path, "2h")
    run = _actual(settings, window)
    # Paid as recorded: the node down at steps 1 and 2 is not paid there ahead of its return at step 3.
    assert run.paid_units["onprem"].tolist() == ONPREM
    # Billed at the steps with data (0, 1, 2, 3, 5): 2 + 1 + 1 + 2 + 2 = 8 node-hours of 8 chips at 1 USD.
    assert run.spend_by_pool_usd["onprem"] == pytest.approx(64.0)


def test_the_onprem_lead_time_changes_nothing_in_the_actual_row(tmp_path: Path) -> None:
    settings, window = _with_onprem(tmp_path, "2h")
    (tmp_path / "unled").mkdir()
    without, unled_window = _with_onprem(tmp_path / "unled", "0s")
    led = _actual(settings, window)
    unled = _actual(without, unled_window)
    assert led.cost_usd == pytest.approx(unled.cost_usd)
    assert led.accelerator_hours == pytest.approx(unled.accelerator_hours)
    assert led.utilization == pytest.approx(unled.utilization)
    # The cloud pool still bills a node it added from its lead time before it appeared.
    assert led.paid_units["burst"].tolist() == [0, 1, 1, 1, 1, 1]
