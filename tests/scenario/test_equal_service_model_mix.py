"""Each trial of the equal-service search records which models forecast the level it planned at."""

from __future__ import annotations

import pytest

from agent.simulation.equal_service import SERVICE_LEVELS, run_and_compare
from agent.simulation.runner import Simulation
from agent.simulation.window import select_window
from agent.sources.trace import read_trace
from config import settings_from_mapping
from forecasting.selection import model_at_level
from tests.conftest import TraceWriter
from tests.scenario.test_simulate import two_class_config


def test_every_forecast_trial_lists_the_models_of_the_level_it_tried(write_trace: TraceWriter) -> None:
    rise = [4.0] * 300 + [4.0 + 2 * i for i in range(40)] + [84.0] * 60
    trace = read_trace(write_trace({"a": rise, "b": [4.0] * len(rise)}))
    settings = settings_from_mapping(two_class_config())
    window = select_window(trace, settings.demand_class_models(), trace.index[288].to_pydatetime(), None)
    session = Simulation(settings, trace, window, SERVICE_LEVELS)
    _, comparison = run_and_compare(session, ["forecast", "reactive"], (0.005,))
    assert comparison is not None
    trials = comparison["0.005"]["forecast"]["trials"]
    assert trials
    outlooks = session.outlooks("forecast")
    for trial in trials:
        level = trial["service_level"]
        # counted here from the forecasts the trial planned on: the model of the level each forecast gave at or
        # above the trial's level, for every class at every tick
        read = [model_at_level(f.model, f.level_at_or_above(level)) for o in outlooks for f in o.forecasts.values()]
        expected = {name: round(read.count(name) / len(read), 4) for name in set(read)}
        assert trial["models"] == expected
        assert sum(trial["models"].values()) == pytest.approx(1.0, abs=1e-3)
