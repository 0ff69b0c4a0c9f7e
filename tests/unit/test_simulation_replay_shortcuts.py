"""What a replayed run reads once per window and leaves out of a search's trials gives the same run: the window's
per-step times, demand and totals are those of the index and the array, and a trial kept without forecast bands
costs and serves what the same run with them does."""

from __future__ import annotations

import numpy as np

from agent.simulation.runner import Simulation, run_policy
from agent.simulation.window import select_window
from agent.sources.trace import read_trace
from config import settings_from_mapping
from tests.conftest import TraceWriter
from tests.scenario.test_simulate import two_class_config


def test_the_windows_steps_read_once_are_the_index_and_the_arrays(write_trace: TraceWriter) -> None:
    rng = np.random.default_rng(7)
    a = list(rng.gamma(2.0, 3.0, 400))
    b = [float(v) if i % 37 else float("nan") for i, v in enumerate(rng.gamma(1.5, 10.0, 400))]
    trace = read_trace(write_trace({"a": a, "b": b}))
    settings = settings_from_mapping(two_class_config())
    window = select_window(trace, settings.demand_class_models(), trace.index[288].to_pydatetime(), None)
    assert len(window.times) == len(window.index) == len(window.rows) == len(window.totals)
    for t, stamp in enumerate(window.index):
        assert window.times[t] == stamp.to_pydatetime()
        assert window.times[t].tzinfo is not None
        expected = {name: float(v) for name, v in zip(window.classes, window.demand[t], strict=True)}
        got = window.at(t)
        assert got.keys() == expected.keys()
        assert all((np.isnan(got[k]) and np.isnan(v)) or got[k] == v for k, v in expected.items())
        assert window.totals[t] == float(np.nansum(window.demand[t]))  # to the bit: the same sum, once
    assert any(np.isnan(window.demand).any(axis=1))  # gaps were there to leave out


def test_a_run_without_bands_costs_and_serves_what_the_same_run_with_them_does(write_trace: TraceWriter) -> None:
    rise = [4.0] * 300 + [4.0 + 2 * i for i in range(40)] + [84.0] * 60
    trace = read_trace(write_trace({"a": rise, "b": [4.0] * len(rise)}))
    settings = settings_from_mapping(two_class_config())
    window = select_window(trace, settings.demand_class_models(), trace.index[288].to_pydatetime(), None)
    session = Simulation(settings, trace, window)
    for policy in ("forecast", "reactive"):
        outlooks = session.outlooks(policy)
        drawn = run_policy(settings, trace, window, policy, outlooks=outlooks)
        trial = run_policy(settings, trace, window, policy, outlooks=outlooks, bands=False)
        assert drawn.forecast_bands  # the report's run keeps them
        assert trial.forecast_bands == {}
        assert trial.summary() == drawn.summary()
        assert np.array_equal(trial.unserved_by_step, drawn.unserved_by_step, equal_nan=True)
        for pool, paid in drawn.paid_units.items():
            assert np.array_equal(trial.paid_units[pool], paid)
