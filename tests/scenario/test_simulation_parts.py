"""The simulation restarts its agents once, at a retrain point near the window's middle, so that the two parts can
be observed in two processes: the outlooks must not depend on how they were computed."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import numpy as np
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
from tests.conftest import TraceWriter
from tests.scenario.test_simulate import two_class_config

DAY = 288  # five-minute steps


def _config(retrain: str, model: str = "ets") -> dict[str, Any]:
    return {
        **two_class_config(),
        "forecast": {"model": model, "history": "1d", "refit_interval": "1h", "retrain_interval": retrain},
    }


@pytest.fixture
def daily(write_trace: TraceWriter) -> Trace:
    """Three days of two noisy daily cycles."""
    rng = np.random.default_rng(3)
    t = np.arange(3 * DAY)
    shape = 30.0 + 20.0 * np.sin(2 * np.pi * t / DAY)
    series = {name: np.round(np.maximum(shape * k + rng.normal(0, 4, len(t)), 0)) for name, k in (("a", 1), ("b", 0.5))}
    return read_trace(write_trace({name: list(values) for name, values in series.items()}))


def _exactly(outlooks: list[Outlook]) -> list[str]:
    """Outlooks compared to the last bit, NaN equal to NaN (an aggregate's last observation is NaN, and a NaN that
    crossed processes is another object, which ``==`` on containers tells apart)."""
    return [repr(outlook) for outlook in outlooks]


def _window(settings: Settings, trace: Trace, days: int = 2) -> SimulationWindow:
    start, end = trace.index[DAY].to_pydatetime(), trace.index[DAY].to_pydatetime() + days * timedelta(days=1)
    return select_window(trace, settings.demand_class_models(), start, end)


@pytest.mark.parametrize(("retrain", "tick"), [("6h", DAY), ("5h", 5 * 60), ("1d", DAY), ("2d", 0), ("7d", 0)])
def test_the_restart_is_the_retrain_point_nearest_the_middle(daily: Trace, retrain: str, tick: int) -> None:
    settings = settings_from_mapping(_config(retrain))
    window = _window(settings, daily)
    assert len(window.index) == 2 * DAY
    assert restart_tick(settings, window) == tick
    parts = restart_parts(settings, window)
    assert [t for part in parts for t in part] == list(range(2 * DAY))
    assert len(parts) == (2 if tick else 1)


def test_outlooks_are_the_same_in_parts_in_two_processes_and_in_one(daily: Trace) -> None:
    settings = settings_from_mapping(_config("6h"))
    window = _window(settings, daily, days=1)
    assert restart_tick(settings, window) == DAY // 2
    whole = observe_window(settings, daily, window, "forecast")
    first, second = restart_parts(settings, window)
    parts = observe_window(settings, daily, window, "forecast", ticks=first)
    parts += observe_window(settings, daily, window, "forecast", ticks=second)
    assert _exactly(parts) == _exactly(whole)
    assert all(whole[t].forecasts for t in (0, DAY // 2 - 1, DAY // 2, DAY - 1)), "every part forecasts"

    together = Simulation(settings, daily, window)
    together.prepare(["forecast", "reactive"], compare_decisions=True)  # the parts in two processes
    assert _exactly(together.outlooks("forecast")) == _exactly(whole)
    assert _exactly(together.outlooks("reactive")) == _exactly(observe_window(settings, daily, window, "reactive"))
    alone = Simulation(settings, daily, window, outlooks={"forecast": whole})  # the last value's here, in order
    assert together.decision_changes() == alone.decision_changes()


def test_runs_and_equal_service_are_the_same_with_the_second_process(
    daily: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_from_mapping(_config("6h"))
    window = _window(settings, daily, days=1)
    session = Simulation(settings, daily, window, SERVICE_LEVELS)
    session.prepare(["forecast", "reactive"])
    policies = ["forecast", "reactive", "static", "oracle"]
    runs, alone = run_and_compare(session, policies, (0.005, 0.001))  # a short window: all in this process
    monkeypatch.setattr(searches, "HELPED_MIN_STEPS", 1)  # the second process, however short the window
    heard: list[str] = []
    helped_runs, helped = run_and_compare(session, policies, (0.005, 0.001), on_done=heard.append)
    assert alone is not None and helped == alone
    assert list(helped_runs) == policies
    assert {p: r.summary() for p, r in helped_runs.items()} == {p: r.summary() for p, r in runs.items()}
    assert sorted(heard) == sorted([*policies, "equal service"])


def test_the_parts_are_counted_once_each_and_only_in_the_calling_thread(daily: Trace) -> None:
    settings = settings_from_mapping(_config("6h"))
    window = _window(settings, daily, days=1)
    heard: list[tuple[int, int]] = []
    session = Simulation(settings, daily, window, progress=lambda n: heard.append((threading.get_ident(), n)))
    session.prepare(["forecast", "reactive"], compare_decisions=True)  # the last value's parts are not counted
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
