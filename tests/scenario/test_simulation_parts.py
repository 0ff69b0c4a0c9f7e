"""The simulation restarts its agents once, at a retrain point near the window's middle, so that the two parts can
be observed in two processes: the outlooks must not depend on how they were computed."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import agent.simulation.equal_service as searches
from agent.outlook import Outlook
from agent.simulation import select_window
from agent.simulation.equal_service import SERVICE_LEVELS, run_and_compare
from agent.simulation.observation import observe_window, restart_parts, restart_tick, share_out
from agent.simulation.runner import Simulation
from agent.simulation.window import SimulationWindow
from agent.sources.trace import Trace, read_trace
from config import settings_from_mapping
from config.schema import Settings
from tests.scenario.test_simulate import two_class_config

# one worker prepares the module's shared simulation once, for every test that reads it
pytestmark = pytest.mark.xdist_group("simulation-parts")

DAY = 288  # five-minute steps
# The window the outlooks are compared on: half a day, retrained every 3 hours, so the agents restart at its middle
# (6 hours in) as a day's window retrained every 6 hours does, at half the forecasting.
HALF_DAY = DAY // 2
RETRAIN = "3h"


def _config(retrain: str, model: str = "ets") -> dict[str, Any]:
    return {
        **two_class_config(),
        "forecast": {"model": model, "history": "1d", "refit_interval": "1h", "retrain_interval": retrain},
    }


@pytest.fixture(scope="module")
def daily(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """Three days of two noisy daily cycles."""
    rng = np.random.default_rng(3)
    t = np.arange(3 * DAY)
    shape = 30.0 + 20.0 * np.sin(2 * np.pi * t / DAY)
    series = {name: np.round(np.maximum(shape * k + rng.normal(0, 4, len(t)), 0)) for name, k in (("a", 1), ("b", 0.5))}
    stamps = pd.date_range("2024-01-01T00:00:00+00:00", periods=len(t), freq="5min").strftime("%Y-%m-%dT%H:%M:%S%z")
    path = Path(tmp_path_factory.mktemp("daily")) / "trace.csv"
    pd.concat(pd.DataFrame({"unique_id": name, "ds": stamps, "y": values}) for name, values in series.items()).to_csv(
        path, index=False
    )
    return read_trace(path)


def _exactly(outlooks: list[Outlook]) -> list[str]:
    """Outlooks compared to the last bit, NaN equal to NaN (an aggregate's last observation is NaN, and a NaN that
    crossed processes is another object, which ``==`` on containers tells apart)."""
    return [repr(outlook) for outlook in outlooks]


def _window(settings: Settings, trace: Trace, span: timedelta = timedelta(days=2)) -> SimulationWindow:
    start = trace.index[DAY].to_pydatetime()
    return select_window(trace, settings.demand_class_models(), start, start + span)


@pytest.fixture(scope="module")
def settings() -> Settings:
    return settings_from_mapping(_config(RETRAIN))


@pytest.fixture(scope="module")
def window(settings: Settings, daily: Trace) -> SimulationWindow:
    return _window(settings, daily, timedelta(hours=12))


@pytest.fixture(scope="module")
def together(settings: Settings, daily: Trace, window: SimulationWindow) -> tuple[Simulation, list[tuple[int, int]]]:
    """The forecast and reactive outlooks (with the service levels the equal-service searches try) and the last
    value's, prepared in parts in two processes, and what the preparation reported as progress (the calling thread,
    the ticks counted). The runs and searches below replay these outlooks; the outlooks themselves are compared."""
    heard: list[tuple[int, int]] = []
    session = Simulation(
        settings, daily, window, SERVICE_LEVELS, progress=lambda n: heard.append((threading.get_ident(), n))
    )
    session.prepare(["forecast", "reactive"], compare_decisions=True)  # the last value's parts are not counted
    return session, heard


@pytest.mark.parametrize(("retrain", "tick"), [("6h", DAY), ("5h", 5 * 60), ("1d", DAY), ("2d", 0), ("7d", 0)])
def test_the_restart_is_the_retrain_point_nearest_the_middle(daily: Trace, retrain: str, tick: int) -> None:
    settings = settings_from_mapping(_config(retrain))
    window = _window(settings, daily)
    assert len(window.index) == 2 * DAY
    assert restart_tick(settings, window) == tick
    parts = restart_parts(settings, window)
    assert [t for part in parts for t in part] == list(range(2 * DAY))
    assert len(parts) == (2 if tick else 1)


def test_outlooks_are_the_same_in_parts_in_two_processes_and_in_one(
    settings: Settings, daily: Trace, window: SimulationWindow, together: tuple[Simulation, Any]
) -> None:
    assert len(window.index) == HALF_DAY
    assert restart_tick(settings, window) == HALF_DAY // 2
    whole = observe_window(settings, daily, window, "forecast", SERVICE_LEVELS)
    first, second = restart_parts(settings, window)
    parts = observe_window(settings, daily, window, "forecast", SERVICE_LEVELS, ticks=first)
    parts += observe_window(settings, daily, window, "forecast", SERVICE_LEVELS, ticks=second)
    assert _exactly(parts) == _exactly(whole)
    assert all(whole[t].forecasts for t in (0, HALF_DAY // 2 - 1, HALF_DAY // 2, HALF_DAY - 1)), "every part forecasts"

    session, _ = together  # the parts in two processes
    assert _exactly(session.outlooks("forecast")) == _exactly(whole)
    reactive = observe_window(settings, daily, window, "reactive", SERVICE_LEVELS)
    assert _exactly(session.outlooks("reactive")) == _exactly(reactive)
    alone = Simulation(settings, daily, window, SERVICE_LEVELS, outlooks={"forecast": whole})  # the last value's here
    assert session.decision_changes() == alone.decision_changes()


def test_runs_and_equal_service_are_the_same_with_the_second_process(
    together: tuple[Simulation, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, _ = together  # the outlooks prepared in two processes
    policies = ["forecast", "reactive", "static", "oracle"]
    runs, alone = run_and_compare(session, policies, (0.005, 0.001))  # a short window: all in this process
    monkeypatch.setattr(searches, "HELPED_MIN_STEPS", 1)  # the second process, however short the window
    heard: list[str] = []
    helped_runs, helped = run_and_compare(session, policies, (0.005, 0.001), on_done=heard.append)
    assert alone is not None and helped == alone
    assert list(helped_runs) == policies
    assert {p: r.summary() for p, r in helped_runs.items()} == {p: r.summary() for p, r in runs.items()}
    assert sorted(heard) == sorted([*policies, "equal service"])


def test_the_parts_are_counted_once_each_and_only_in_the_calling_thread(
    window: SimulationWindow, together: tuple[Simulation, list[tuple[int, int]]]
) -> None:
    session, heard = together
    assert {thread for thread, _ in heard} == {threading.get_ident()}
    assert sum(n for _, n in heard) == 2 * len(window.index)
    assert len(session.outlooks("forecast")) == len(session.outlooks("reactive")) == len(window.index)


def _broken_args(name: str, ticks: range, progress: object = None) -> tuple[Any, ...]:
    """Arguments ``observe_window`` cannot work with, in whichever process runs the job."""
    return (None, None, None, name, (), None, None, ticks)


def test_a_part_that_fails_in_either_process_fails_the_preparation() -> None:
    jobs = [("forecast", range(0, 1)), ("forecast", range(1, 2)), ("reactive", range(0, 1))]
    with pytest.raises(AttributeError):
        share_out(jobs, _broken_args, None)
