"""The daemon's stand-in model (the calibrated last value the first ticks forecast with while the configured model
first fits) is calibrated as far ahead as the agent asks. Calibrated for an hour only, a pool with an hour's lead
time made every forecast of those ticks the bare last value (asked past its calibration), with no spread at all."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from actuators import SimulatedCluster
from agent.daemon.replay import RehearsalCluster, ShiftedTraceSource
from agent.daemon.wiring import DaemonParts, assemble
from agent.ledger import InMemoryLedger
from agent.notify import RecordingNotifier
from config.schema import Settings
from forecasting.base import Forecaster
from models.clock import SimulatedClock
from tests.daemon.scenario import TRACE_START, helios_settings, helios_trace

STEP = timedelta(minutes=5)


def _settings(lead_time: timedelta) -> Settings:
    base = helios_settings(None)
    pools = [pool.model_copy(update={"lead_time": lead_time}) for pool in base.pools]
    forecast = base.forecast.model_copy(update={"model": "ets"})  # not a baseline: the daemon takes a stand-in
    return base.model_copy(update={"pools": pools, "forecast": forecast})


def _noisy_history() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    stamps = pd.date_range("2026-01-01", periods=3 * 288, freq="5min", tz="UTC")
    level = 40 + 10 * np.sin(np.arange(len(stamps)) / 40) + rng.normal(0, 2, len(stamps))
    return pd.DataFrame({"unique_id": "a", "ds": stamps, "y": np.maximum(level, 0.0)})


def _first_forecaster(settings: Settings) -> tuple[Forecaster, int]:
    """What the daemon's first ticks forecast with, and how many steps ahead they ask."""
    clock = SimulatedClock(datetime.fromisoformat("2026-01-05T00:00:00+00:00"))
    parts = DaemonParts(
        source=ShiftedTraceSource(helios_trace(), TRACE_START, clock.now()),
        actuator=RehearsalCluster(SimulatedCluster(settings.pool_specs(), clock), clock),
        ledger=InMemoryLedger(),
        notifier=RecordingNotifier(),
        clock=clock,
    )
    assembled = assemble(settings, "enforce", parts, {"POD_NAME": "replica-a", "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()
    agent = assembled.loop.agent
    return agent.parts.forecaster, agent.horizon


def test_with_an_hours_lead_time_the_stand_in_forecasts_a_spread_over_every_step_asked() -> None:
    stand_in, steps = _first_forecaster(_settings(timedelta(minutes=60)))
    assert steps == 13  # an hour's lead time and a minute's tick at five-minute steps

    history = _noisy_history()
    stand_in.fit(history, STEP)
    forecast = stand_in.predict(history, steps, (0.5, 0.9))

    assert set(forecast["model"]) == {"naive"}  # not the bare last value of a forecast asked past its calibration
    assert (forecast["q0.9"] > forecast["q0.5"]).all()


def test_with_a_short_lead_time_the_stand_in_is_the_same_hour_long_model() -> None:
    stand_in, steps = _first_forecaster(_settings(timedelta(minutes=10)))
    assert steps == 3

    history = _noisy_history()
    stand_in.fit(history, STEP)
    forecast = stand_in.predict(history, 12, (0.5, 0.9))

    assert set(forecast["model"]) == {"naive"}  # calibrated an hour ahead at least, as before
