"""While the configured model's fit keeps failing, the stand-in is refitted at each refit, and the daemon says so.

The first tick fits the stand-in (the calibrated last value) and the daemon's ticks refit no more after that; each
scheduled refit fitted only the configured model. When that fit failed at every refit (a library's error, memory),
the stand-in forecast for ever on the calibration of its start-up history: a day of hourly refits moved its newest
calibration origin by 0 h, and nothing but the refit errors' count said that the configured model never came. Each
staged refit now refits a copy of the stand-in on the same history when the configured model's fit fails, and the
daemon exports when the model in use was fitted (``leadtime_model_fitted_timestamp_seconds``) and whether the
configured model is still pending (``leadtime_configured_model_pending``), which the monitoring rules alert on.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Self

import pandas as pd

from forecasting import PersistenceForecaster
from forecasting.calibrated import CalibratedForecaster, last_value_forecaster
from tests.daemon.test_first_tick import _daemon

HOUR = timedelta(hours=1)


class FailsToFit(PersistenceForecaster):
    """A configured model whose fit fails the first ``failures`` times, as an allocation that cannot be made does."""

    name = "lightgbm"

    def __init__(self, failures: int) -> None:
        self.failures = failures

    def fit(self, history: pd.DataFrame, step: timedelta) -> Self:
        if self.failures > 0:
            self.failures -= 1
            raise MemoryError("cannot allocate the training rows")
        return super().fit(history, step)

    def __deepcopy__(self, memo: dict[int, Any]) -> FailsToFit:
        return self  # the staged copy counts the failures with it; persistence keeps no fitted state


def _newest_origin(model: object, uid: str) -> int:
    """The newest forecast origin of the stand-in's calibration of ``uid``, in nanoseconds."""
    assert isinstance(model, CalibratedForecaster)
    residuals = model.residuals(uid)
    assert residuals is not None
    return int(residuals.origins_ns.max())


def test_the_stand_in_is_refitted_while_the_configured_model_keeps_failing() -> None:
    configured = FailsToFit(failures=1_000)
    assembled = _daemon(configured, last_value_forecaster())
    daemon, agent, metrics = assembled.daemon, assembled.loop.agent, assembled.metrics
    clock = daemon._clock
    daemon.elect()
    daemon.tick()  # fits the stand-in on the start-up history
    uid = agent.classes[0].name
    started_on = _newest_origin(agent.parts.forecaster, uid)

    for _ in range(6):  # hourly refits, each failing for the configured model, and ticks between them
        clock.advance(HOUR)  # type: ignore[attr-defined]
        daemon.refit()
        daemon.elect()
        daemon.tick()

    assert agent.configured_model_pending is configured
    assert agent.parts.forecaster.name == "naive"
    moved = timedelta(microseconds=(_newest_origin(agent.parts.forecaster, uid) - started_on) / 1_000)
    assert moved == 6 * HOUR  # calibrated on the newest history: 0 h before
    assert agent.last_refit == clock.now()
    assert metrics.errors.labels("MemoryError")._value.get() == 6  # every failure of the configured model counted
    assert metrics.model_fitted._value.get() == clock.now().timestamp()
    assert metrics.configured_model_pending._value.get() == 1


def test_the_configured_model_is_swapped_in_once_its_fit_succeeds() -> None:
    configured = FailsToFit(failures=2)
    assembled = _daemon(configured, last_value_forecaster())
    daemon, agent, metrics = assembled.daemon, assembled.loop.agent, assembled.metrics
    clock = daemon._clock
    daemon.elect()
    daemon.tick()
    for _ in range(2):
        clock.advance(HOUR)  # type: ignore[attr-defined]
        daemon.refit()
    assert metrics.configured_model_pending._value.get() == 1

    clock.advance(HOUR)  # type: ignore[attr-defined]
    daemon.refit()
    assert agent.parts.forecaster is configured and agent.configured_model_pending is None
    assert metrics.configured_model_pending._value.get() == 0
    assert metrics.model_fitted._value.get() == clock.now().timestamp()
    assert metrics.errors.labels("MemoryError")._value.get() == 2
