"""The model-age gauge holds the first tick's fit, and exports nothing before any fit.

``leadtime_model_fitted_timestamp_seconds`` was set only when a refit beside the ticks was swapped in, and exported
0 until then: the first tick's own fit (the only fit in a tick once the daemon runs) never set it, so a pod whose
start-up refit failed read 0 (1970) and LeadtimeModelStale fired on it four hours later, saying the model was fitted
about 56 years ago. The gauge is now set at every fit, the tick's included, and has no sample before the first one.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Self

import pandas as pd

from forecasting import PersistenceForecaster
from tests.daemon.test_first_tick import CLOCK_START, _daemon

GAUGES = ("leadtime_model_fitted_timestamp_seconds", "leadtime_configured_model_pending")


class FitsOnce(PersistenceForecaster):
    """A configured model whose first fit succeeds and every later one fails, as an allocation that cannot be made
    once the history has grown does."""

    name = "lightgbm"

    def __init__(self) -> None:
        self.fits = 0

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        self.fits += 1
        if self.fits > 1:
            raise MemoryError("cannot allocate the training rows")
        return super().fit(history, step)

    def __deepcopy__(self, memo: dict[int, Any]) -> FitsOnce:
        return self  # the staged copy counts the fits with it; persistence keeps no state a tick reads mid-fit


def _samples(exposition: bytes) -> dict[str, float]:
    """The model gauges' samples in the daemon's /metrics text, by name."""
    lines = [line.split() for line in exposition.decode().splitlines() if line.startswith(GAUGES)]
    return {name: float(value) for name, value in lines}


def test_the_gauge_holds_the_first_ticks_fit_when_the_start_up_refit_fails() -> None:
    configured = FitsOnce()
    assembled = _daemon(configured, None)
    daemon, agent, metrics = assembled.daemon, assembled.loop.agent, assembled.metrics
    clock = daemon._clock
    assert _samples(metrics.exposition()) == {}  # no fit yet: no sample (0, read as 1970, before)

    daemon.elect()
    daemon.tick()  # the first tick fits the configured model on the start-up history
    assert agent.last_refit == CLOCK_START
    clock.advance(timedelta(minutes=20))  # type: ignore[attr-defined]
    daemon.refit()  # the start-up refit fails: the tick's model is kept

    assert configured.fits == 2
    assert metrics.errors.labels("MemoryError")._value.get() == 1
    assert _samples(metrics.exposition()) == {
        "leadtime_model_fitted_timestamp_seconds": CLOCK_START.timestamp(),  # the tick's fit: 0 (1970) before
        "leadtime_configured_model_pending": 0,
    }
