"""Interpolating what the same service costs between the settings that bracket a target."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from agent.simulation.equal_service import SERVICE_LEVELS, Evaluate, Trial, interpolate, search_levels


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


def _curve(calls: list[float]) -> Evaluate:
    """A forecast policy whose unserved demand falls and whose cost rises with the service level."""

    def evaluate(level: float) -> Trial:
        calls.append(level)
        return Trial(level, 100.0 + 50.0 * level, 0.03 * (1.0 - level) ** 0.8)

    return evaluate


def test_the_level_search_brackets_each_target_between_neighbouring_levels() -> None:
    calls: list[float] = []
    trials = search_levels(_curve(calls), (0.005, 0.001))
    assert interpolate(trials, 0.005, "service_level")["service_level"] == [0.8, 0.9]
    assert interpolate(trials, 0.001, "service_level")["service_level"] == [0.98, 0.99]
    assert len(calls) == len(set(calls)), "no level is tried twice"
    assert len(calls) < len(SERVICE_LEVELS)


def test_a_helper_finds_the_same_brackets_trying_two_levels_at_a_time() -> None:
    alone = search_levels(_curve([]), (0.005, 0.001))
    here: list[float] = []
    away: list[float] = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        remote = _curve(away)
        helped = search_levels(_curve(here), (0.005, 0.001), lambda level: pool.submit(remote, level))
    for target in (0.005, 0.001):
        assert interpolate(helped, target, "service_level") == interpolate(alone, target, "service_level")
    assert away, "the helper tried levels"
    assert not set(here) & set(away)
    assert len(here) < len(alone), "fewer levels in a row here than alone"


def test_a_busy_helper_leaves_every_level_to_this_process() -> None:
    here: list[float] = []
    trials = search_levels(_curve(here), (0.005,), lambda level: None)
    assert interpolate(trials, 0.005, "service_level")["service_level"] == [0.8, 0.9]
    assert len(here) == len(trials)


def test_a_target_no_level_meets_is_not_searched() -> None:
    calls: list[float] = []
    trials = search_levels(_curve(calls), (1e-9,))
    assert calls == [SERVICE_LEVELS[-1]]
    assert interpolate(trials, 1e-9, "service_level")["cost_usd"] is None
