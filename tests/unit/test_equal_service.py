"""Interpolating what the same service costs between the settings that bracket a target."""

from __future__ import annotations

import pytest

from agent.simulation.equal_service import Trial, interpolate


def test_cost_is_interpolated_between_the_bracketing_settings() -> None:
    trials = [Trial(0, 100.0, 0.010), Trial(1, 110.0, 0.004), Trial(2, 120.0, 0.001)]
    row = interpolate(trials, 0.005, "headroom_units")
    # between headroom 0 (1.0 %) and 1 (0.4 %): 100 + (0.010 - 0.005) / (0.010 - 0.004) * 10
    assert row["cost_usd"] == pytest.approx(108.33, abs=0.01)
    assert row["headroom_units"] == [0, 1]
    assert row["unserved_fraction"] == 0.005


def test_already_met_and_never_met_targets_say_so() -> None:
    met = interpolate([Trial(0.9, 50.0, 0.0001)], 0.001, "service_level")
    assert met["cost_usd"] == 50.0
    assert "already meets" in met["note"]
    never = interpolate([Trial(0.9, 50.0, 0.02), Trial(0.999, 90.0, 0.01)], 0.001, "service_level")
    assert never["cost_usd"] is None
    assert never["unserved_fraction"] == 0.01


def test_a_costlier_failing_setting_does_not_bracket() -> None:
    # A setting that costs more yet serves worse is not the lower bracket.
    trials = [Trial(0.5, 100.0, 0.02), Trial(0.7, 130.0, 0.01), Trial(0.9, 120.0, 0.004)]
    row = interpolate(trials, 0.005, "service_level")
    assert row["service_level"] == [0.5, 0.9]
