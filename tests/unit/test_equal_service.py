"""Interpolating what the same service costs between the settings that bracket a target."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from agent.simulation.equal_service import SERVICE_LEVELS, Evaluate, Trial, interpolate, own_level, search_levels
from agent.simulation.runner import PolicyRun
from config import settings_from_mapping
from tests.scenario.test_simulate import two_class_config


def test_cost_is_interpolated_between_the_bracketing_settings() -> None:
    trials = [Trial(0, 100.0, 0.010), Trial(1, 110.0, 0.004), Trial(2, 120.0, 0.001)]
    row = interpolate(trials, 0.005, "headroom_units")
    # between headroom 0 (1.0 %) and 1 (0.4 %): 100 + (0.010 - 0.005) / (0.010 - 0.004) * 10
    assert row["cost_usd"] == pytest.approx(108.33, abs=0.01)
    assert row["headroom_units"] == [0, 1]
    assert row["unserved_fraction"] == 0.005
    # the two runs the figure rests on, as the report shows them beside it
    assert row["trials"] == [
        {"headroom_units": 0, "cost_usd": 100.0, "unserved_fraction": 0.010},
        {"headroom_units": 1, "cost_usd": 110.0, "unserved_fraction": 0.004},
    ]


def test_already_met_and_never_met_targets_say_so() -> None:
    met = interpolate([Trial(0.9, 50.0, 0.0001)], 0.001, "service_level")
    assert met["cost_usd"] == 50.0
    assert "already meets" in met["note"]
    assert met["trials"] == [{"service_level": 0.9, "cost_usd": 50.0, "unserved_fraction": 0.0001}]
    never = interpolate([Trial(0.9, 50.0, 0.02), Trial(0.999, 90.0, 0.01)], 0.001, "service_level")
    assert never["cost_usd"] is None
    assert never["unserved_fraction"] == 0.01
    assert never["trials"] == [{"service_level": 0.999, "cost_usd": 90.0, "unserved_fraction": 0.01}]


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


def test_a_known_trial_is_not_tried_again_and_the_brackets_stay() -> None:
    alone: list[float] = []
    without = search_levels(_curve(alone), (0.005, 0.001))
    calls: list[float] = []
    evaluate = _curve(calls)
    seeded = search_levels(evaluate, (0.005, 0.001), known={3: _curve([])(0.9)})
    for target in (0.005, 0.001):
        assert interpolate(seeded, target, "service_level") == interpolate(without, target, "service_level")
    assert 0.9 not in calls
    assert len(calls) < len(alone)


def _settings(planner: dict[str, Any], waiting_cost: float | None = None, b_level: float | None = None) -> Any:
    raw = two_class_config()  # one pool of 4-chip units at 2 USD per chip-hour serving classes a and b
    if waiting_cost is not None:
        raw["demand_classes"][0]["waiting_cost_per_accelerator_hour_usd"] = waiting_cost
    if b_level is not None:
        raw["demand_classes"][1]["service_level"] = b_level
    raw["planner"] = planner
    return settings_from_mapping(raw)


def test_the_forecast_run_counts_as_the_trial_at_the_level_it_was_planned_at() -> None:
    run = PolicyRun("forecast", cost_usd=120.0, demanded_accelerator_hours=100.0, unserved_accelerator_hours=0.3)
    # No level configured: the classes are planned at 0.9, as a trial at 0.9 would.
    assert own_level(_settings({}), run) == {3: Trial(0.9, 120.0, 0.003)}
    assert own_level(_settings({"service_level": 0.97}), run) == {5: Trial(0.97, 120.0, 0.003)}
    # A level the search never tries, and a waiting cost's newsvendor level (2 / (2 + 2) = 0.5 is one it tries).
    assert own_level(_settings({"service_level": 0.93}), run) == {}
    assert own_level(_settings({"waiting_cost_per_accelerator_hour_usd": 3.0}), run) == {}
    assert own_level(_settings({"waiting_cost_per_accelerator_hour_usd": 2.0}), run) == {0: Trial(0.5, 120.0, 0.003)}
    # a's waiting cost plans it at 0.5 while b stays at 0.9: no trial plans the two so
    assert own_level(_settings({}, waiting_cost=2.0), run) == {}
    assert own_level(_settings({}), None) == {}


def test_a_class_level_of_its_own_counts_only_where_a_trial_plans_every_class_the_same() -> None:
    run = PolicyRun("forecast", cost_usd=120.0, demanded_accelerator_hours=100.0, unserved_accelerator_hours=0.3)
    # A trial plans every class at its level: b's own 0.95 beside a's 0.9 is no trial's, nor 0.95 beside 0.97.
    assert own_level(_settings({}, b_level=0.95), run) == {}
    assert own_level(_settings({"service_level": 0.97}, b_level=0.95), run) == {}
    assert own_level(_settings({"service_level": 0.95}, b_level=0.95), run) == {4: Trial(0.95, 120.0, 0.003)}
