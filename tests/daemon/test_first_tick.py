"""Ready after the first tick, not after the first full fit: the first ticks forecast with a cheap stand-in while
the configured model fits beside them, and the fitted model is swapped in between two ticks, never half fitted.

The configured model here is gated: its fit waits until the test opens the gate, so what a tick does while the
model fits is observed by events, not by timing."""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Self

import pandas as pd

from actuators import SimulatedCluster
from agent.daemon.replay import RehearsalCluster, ShiftedTraceSource
from agent.daemon.wiring import AssembledDaemon, DaemonParts, assemble
from agent.ledger import InMemoryLedger
from agent.notify import RecordingNotifier
from forecasting import PersistenceForecaster
from forecasting.base import Forecaster
from forecasting.calibrated import last_value_forecaster
from forecasting.factory import stand_in_forecaster
from models.clock import SimulatedClock
from tests.daemon.scenario import TRACE_START, helios_settings, helios_trace

# Generous: the fit of the stand-in and one tick take well under a second on an idle 2-core machine.
DEADLINE = 120.0


@dataclass
class Gate:
    """Shared by a gated model and its copies: when a fit started, when it may finish, what predicted."""

    fitting: threading.Event = field(default_factory=threading.Event)
    open: threading.Event = field(default_factory=threading.Event)
    fits_done: int = 0
    predicts: list[str] = field(default_factory=list)


class GatedForecaster:
    """A real forecaster whose ``fit`` waits for the gate; records which instance predicted."""

    def __init__(self, inner: Forecaster, gate: Gate, label: str = "configured") -> None:
        self.inner, self.gate, self.label = inner, gate, label
        self.name = inner.name
        self.fitted = False

    @property
    def min_history_steps(self) -> int:
        return self.inner.min_history_steps

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        self.gate.fitting.set()
        assert self.gate.open.wait(DEADLINE), "the test never opened the gate"
        self.inner.fit(history, step)
        self.fitted = True
        self.gate.fits_done += 1
        return self

    def predict(self, recent: pd.DataFrame, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        self.gate.predicts.append(f"{self.label} fitted={self.fitted}")
        return self.inner.predict(recent, horizon, quantiles)

    def __deepcopy__(self, memo: dict[int, Any]) -> GatedForecaster:
        twin = GatedForecaster(copy.deepcopy(self.inner, memo), self.gate, f"{self.label} copy")
        twin.fitted = self.fitted
        return twin


CLOCK_START = datetime.fromisoformat("2026-01-05T00:00:00+00:00")


def _daemon(forecaster: Forecaster, stand_in: Forecaster | None) -> AssembledDaemon:
    settings = helios_settings(None)
    clock = SimulatedClock(CLOCK_START)
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    parts = DaemonParts(
        source=ShiftedTraceSource(helios_trace(), TRACE_START, clock.now()),
        actuator=RehearsalCluster(cluster, clock),
        ledger=InMemoryLedger(),
        notifier=RecordingNotifier(),
        clock=clock,
        forecaster=forecaster,
        stand_in=stand_in,
    )
    assembled = assemble(settings, "enforce", parts, {"POD_NAME": "replica-a", "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()  # the jobs are driven directly; no socket needed
    return assembled


def _in_thread(job: Any) -> threading.Thread:
    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    return thread


def test_the_first_tick_runs_on_the_stand_in_while_the_configured_model_fits() -> None:
    gate = Gate()
    assembled = _daemon(GatedForecaster(PersistenceForecaster(), gate), last_value_forecaster())
    daemon, health, agent = assembled.daemon, assembled.health, assembled.loop.agent
    daemon.elect()
    refit = _in_thread(daemon.refit)
    assert gate.fitting.wait(DEADLINE)

    tick = _in_thread(daemon.tick)  # on the old hand-over this tick waited for the whole fit
    tick.join(DEADLINE)
    assert not tick.is_alive(), "the first tick waited for the configured model's fit"
    assert health.readiness(CLOCK_START).ready
    assert gate.predicts == []  # the tick forecast with the stand-in: the model being fitted was never used
    assert agent.parts.forecaster.name == "naive"

    gate.open.set()
    refit.join(DEADLINE)
    assert not refit.is_alive()
    assert gate.fits_done == 1
    daemon.tick()
    assert gate.predicts == ["configured copy fitted=True"]  # swapped in whole, between two ticks


def test_a_refit_fits_a_copy_and_the_ticks_keep_the_fitted_model_until_the_swap() -> None:
    gate = Gate()
    gate.open.set()
    assembled = _daemon(GatedForecaster(PersistenceForecaster(), gate), None)
    daemon, agent = assembled.daemon, assembled.loop.agent
    daemon.elect()
    daemon.refit()
    first = agent.parts.forecaster
    assert isinstance(first, GatedForecaster)
    assert first.fitted

    gate.open.clear()
    gate.fitting.clear()
    refit = _in_thread(daemon.refit)
    assert gate.fitting.wait(DEADLINE)
    daemon.tick()  # runs while the second fit waits for the gate
    assert agent.parts.forecaster is first
    assert gate.predicts[-1] == "configured copy fitted=True"
    gate.open.set()
    refit.join(DEADLINE)
    assert not refit.is_alive()
    assert agent.parts.forecaster is not first
    assert gate.fits_done == 2


def test_an_expensive_configured_model_gets_the_calibrated_last_value_as_stand_in() -> None:
    settings = helios_settings(None)
    configured = settings.forecast.model_copy(update={"model": "auto"})  # what helios-earth.yaml configures
    stand_in = stand_in_forecaster(configured)
    assert stand_in is not None
    assert stand_in.name == "naive"
    baseline = configured.model_copy(update={"model": "persistence"})
    assert stand_in_forecaster(baseline) is None


def test_stopping_abandons_a_fit_beside_the_ticks_instead_of_waiting_for_it_with_the_lease_held() -> None:
    gate = Gate()
    assembled = _daemon(GatedForecaster(PersistenceForecaster(), gate), last_value_forecaster())
    daemon, agent = assembled.daemon, assembled.loop.agent
    daemon.elect()
    daemon.tick()
    refit = _in_thread(daemon.refit)
    assert gate.fitting.wait(DEADLINE)  # the configured model fits; no tick runs

    stopper = _in_thread(daemon.stop_working)
    stopper.join(DEADLINE)  # on the old stop this waited for the whole fit, ticks stopped and the lease held
    assert not stopper.is_alive(), "stop_working waited for a fit that writes nothing"
    refit.join(DEADLINE)
    assert not refit.is_alive(), "the refit job still waits for its fit: the scheduler's worker would keep the process"
    fitting = [t for t in threading.enumerate() if t.name == "leadtime-refit-fit"]
    assert fitting and all(t.daemon for t in fitting)  # the abandoned fit goes on where the process need not wait

    gate.open.set()
    for thread in fitting:
        thread.join(DEADLINE)
    assert gate.fits_done == 1  # it fitted after all, and was never swapped in
    assert agent.parts.forecaster.name == "naive"
    assert agent.configured_model_pending is not None


def test_a_tick_does_not_refit_the_live_model_while_the_scheduled_refit_fits_its_copy() -> None:
    gate = Gate()
    gate.open.set()
    assembled = _daemon(GatedForecaster(PersistenceForecaster(), gate), None)
    daemon, agent = assembled.daemon, assembled.loop.agent
    clock = daemon._clock
    assert isinstance(clock, SimulatedClock)
    daemon.elect()
    daemon.refit()
    daemon.tick()
    clock.advance(agent.settings.forecast.refit_interval)  # the next refit is due
    gate.open.clear()
    gate.fitting.clear()
    refit = _in_thread(daemon.refit)  # a slow fit (a LightGBM retrain) beside the ticks
    assert gate.fitting.wait(DEADLINE)
    clock.advance(timedelta(seconds=60))
    gate.fitting.clear()
    tick = _in_thread(daemon.tick)
    tick.join(DEADLINE)
    assert not tick.is_alive(), "the tick waited on a fit: it refitted the live model itself"
    assert not gate.fitting.is_set()
    gate.open.set()
    refit.join(DEADLINE)
    assert gate.fits_done == 2  # the first refit and the scheduled one: none in the tick


class FailingRefit(PersistenceForecaster):
    """Fits once, then every fit fails as a library's error would (not the forecaster's own refusal)."""

    fits = 0

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        FailingRefit.fits += 1
        if FailingRefit.fits > 1:
            raise RuntimeError("the boosters could not be trained")
        return super().fit(history, step)

    def __deepcopy__(self, memo: dict[int, Any]) -> FailingRefit:
        return self  # the staged copy shares the counter's behaviour; persistence keeps no fitted state


def test_after_a_failed_refit_the_ticks_go_on_with_the_models_fitted_before() -> None:
    FailingRefit.fits = 0
    assembled = _daemon(FailingRefit(), None)
    daemon, agent, metrics = assembled.daemon, assembled.loop.agent, assembled.metrics
    clock = daemon._clock
    assert isinstance(clock, SimulatedClock)
    daemon.elect()
    daemon.refit()
    daemon.tick()
    clock.advance(agent.settings.forecast.refit_interval)
    daemon.refit()  # fails: the refit job survives it
    assert FailingRefit.fits == 2
    for _ in range(3):
        clock.advance(timedelta(seconds=60))
        daemon.tick()
        assert metrics.last_success._value.get() == clock.now().timestamp()  # every tick succeeded
    assert FailingRefit.fits == 2  # and none of them tried the refit again
    assert assembled.loop.agent.last_refit is not None


def test_a_tick_whose_first_fit_fails_holds_every_class_with_the_reason() -> None:
    FailingRefit.fits = 1  # the next fit fails
    assembled = _daemon(FailingRefit(), None)
    agent = assembled.loop.agent
    report = agent.run_once(CLOCK_START)
    assert report.forecasts == {}
    names = [c.name for c in agent.classes]
    assert names and all("the models could not be fitted (RuntimeError" in report.problems[n] for n in names)
