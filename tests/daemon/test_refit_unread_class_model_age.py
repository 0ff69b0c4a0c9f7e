"""A class whose history the refits do not read keeps its model for at most ``forecast.history``, and says how old.

A refit beside the ticks whose history read missed a class (Prometheus refusing its range query) fitted the others
and left that class the model and calibration of the last fit that read it, with no end: a class refused for a week
was still forecast by them. The refit's warning said only "kept from the last fit", and the model-age gauge
(``leadtime_model_fitted_timestamp_seconds``, which ``LeadtimeModelStale`` reads) moved to the new refit, so the
age of that class's model showed nowhere. Now the warning says how old the model kept is and until when it is kept,
the gauge holds the time of the oldest model kept (the stale-model alert fires on it), and once the class has gone
unread longer than ``forecast.history`` its model and calibration are forgotten: the warning says so, and the class
is forecast as a new one until a refit reads it.

The local Prometheus of ``test_refit_names_classes_not_read`` answers instant and range queries as the Prometheus
HTTP API reference documents them, and refuses the range queries of one namespace with HTTP 422 (an "execution"
error). The daemon's configured model, seasonal_naive, keeps a model and calibration per class.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from actuators import SimulatedCluster
from agent.daemon.wiring import AssembledDaemon, DaemonParts, assemble
from agent.ledger import InMemoryLedger
from agent.notify import RecordingNotifier
from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from config import settings_from_mapping
from config.schema import Settings
from models.clock import SimulatedClock
from tests.daemon.test_refit_names_classes_not_read import Broken, _Handler
from tests.daemon.test_refit_read_does_not_hold_ticks import CLASSES, NOW
from tests.fakes.http_server import serving


@pytest.fixture
def prometheus() -> Iterator[tuple[str, Broken]]:
    broken = Broken()
    with serving(type("Handler", (_Handler,), {"broken": broken})) as url:
        yield url, broken


def _settings(url: str) -> Settings:
    pool = {"id": "shared", "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8, "min_units": 0,
            "max_units": 20, "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": CLASSES}  # fmt: skip
    config: dict[str, Any] = {
        "demand_classes": [{"name": name} for name in CLASSES],
        "pools": [pool],
        "forecast": {"model": "seasonal_naive", "history": "1d", "step": "5m", "refit_interval": "1h"},
        "loop": {"tick_interval": "1m"},
        "ledger": {"backend": "memory"},
        "daemon": {"leader_election": {"enabled": False}},
        "prometheus": {"url": url, "timeout": "30s", "retries": 0, "retry_backoff_s": 0},
    }
    return settings_from_mapping(config, source="test config")


def _daemon(settings: Settings, clock: SimulatedClock) -> AssembledDaemon:
    assert settings.prometheus is not None
    queries = demand_queries(settings.demand_class_models(), settings.prometheus)
    parts = DaemonParts(
        source=PrometheusSource.from_settings(settings.prometheus, queries),
        actuator=SimulatedCluster(settings.pool_specs(), clock),
        ledger=InMemoryLedger(),
        notifier=RecordingNotifier(),
        clock=clock,
    )  # the configured model: seasonal_naive
    assembled = assemble(settings, "enforce", parts, {"POD_NAME": "replica-a", "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()  # the jobs are driven directly; no socket needed
    return assembled


def _refit_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    found = [r.getMessage() for r in caplog.records if r.name == "agent.loop" and r.levelno == logging.WARNING]
    caplog.clear()
    return found


def test_a_class_the_refits_do_not_read_shows_its_models_age_and_is_forgotten_after_the_history_span(
    prometheus: tuple[str, Broken], caplog: pytest.LogCaptureFixture
) -> None:
    url, broken = prometheus
    clock = SimulatedClock(NOW)
    assembled = _daemon(_settings(url), clock)
    daemon, agent, metrics = assembled.daemon, assembled.loop.agent, assembled.metrics
    daemon.elect()
    daemon.refit()  # every class read
    assert metrics.model_fitted._value.get() == NOW.timestamp()

    broken.namespace = "team-2"
    with caplog.at_level(logging.WARNING, logger="agent.loop"):
        for hours in (1, 2, 3, 4, 5):  # hourly refits that do not read team-2
            clock.set(NOW + timedelta(hours=hours))
            daemon.refit()
            assert agent.last_refit == clock.now()  # the classes read were refitted and swapped in
            warnings = _refit_warnings(caplog)
            assert len(warnings) == 1, warnings
            assert "the history of class team-2 was not read" in warnings[0]
            assert (
                f"its model and calibration are kept from the last fit that read it, {hours}h ago (the refit of "
                f"{NOW:%Y-%m-%d %H:%M} UTC), for at most forecast.history (1d)"
            ) in warnings[0]
            # the model-age gauge holds the oldest model kept, the one team-2 is forecast with
            assert metrics.model_fitted._value.get() == NOW.timestamp()

        clock.set(NOW + timedelta(days=1, hours=1))  # team-2 last read 25 hours ago, longer than forecast.history
        daemon.refit()
        warnings = _refit_warnings(caplog)

    assert len(warnings) == 1, warnings
    assert (
        f"its model and calibration, from the refit of {NOW:%Y-%m-%d %H:%M} UTC, are forgotten: no refit has read it "
        "for longer than forecast.history (1d); it is forecast as a new class until a refit reads it"
    ) in warnings[0]
    assert metrics.model_fitted._value.get() == clock.now().timestamp()  # no model kept: every one is this refit's
    kept = agent.parts.forecaster.read_through()  # type: ignore[attr-defined]
    assert "team-2" not in kept and {"team-0", "team-1", "team-3"} <= set(kept)

    # A refit that reads it again fits it anew.
    broken.namespace = None
    clock.advance(timedelta(hours=1))
    with caplog.at_level(logging.WARNING, logger="agent.loop"):
        daemon.refit()
    assert _refit_warnings(caplog) == []
    assert agent.parts.forecaster.read_through()["team-2"] == max(  # type: ignore[attr-defined]
        agent.parts.forecaster.read_through().values()  # type: ignore[attr-defined]
    )
    assert metrics.model_fitted._value.get() == clock.now().timestamp()
