"""``prometheus.max_staleness`` below one forecast step is refused at load: demand is read on the step grid, whose
newest step starts up to a step before the read, so with a limit of 1ms a series Prometheus answered on every step
read as stale at every tick, and with 1m on a 5-minute step at four ticks of five."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.sources.prometheus import PrometheusSource
from config import settings_from_mapping
from config.prometheus import PrometheusSettings
from models import ConfigError, DemandClass, MetricsUnavailable
from tests.fakes.prometheus_api import FakePrometheusApi

BASE: dict[str, Any] = {
    "demand_classes": [{"name": "train"}],
    "pools": [
        {
            "id": "a100",
            "kind": "gpu-node-pool",
            "chips_per_unit": 8,
            "max_units": 4,
            "price_per_chip_hour_usd": 3.67,
            "lead_time": "10m",
            "serves": ["train"],
        }
    ],
}
URL = "http://prometheus:9090"


@pytest.mark.parametrize(
    ("extra", "shown"),
    [
        ({"prometheus": {"url": URL, "max_staleness": "1ms"}}, "(forecast.step, 5m), got 1ms"),
        ({"prometheus": {"url": URL, "max_staleness": "4m"}}, "(forecast.step, 5m), got 4m"),
        ({"prometheus": {"url": URL}, "forecast": {"step": "1h"}}, "(forecast.step, 1h), got 15m"),
    ],
)
def test_a_staleness_limit_below_a_forecast_step_is_refused_naming_the_key(extra: dict[str, Any], shown: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, **extra})
    (problem,) = caught.value.problems
    assert problem.key_path == "prometheus.max_staleness"
    assert f"must be at least one forecast step {shown}" in problem.message


@pytest.fixture
def prometheus() -> Iterator[FakePrometheusApi]:
    api = FakePrometheusApi().start()
    api.set_demand("train", 8.0)
    try:
        yield api
    finally:
        api.stop()


def _unavailable_ticks(api: FakePrometheusApi, limit: str, step: timedelta) -> int:
    """Of 60 one-minute ticks, each reading two hours on the step grid, how many find the class unavailable."""
    settings = PrometheusSettings.model_validate({"url": api.url, "max_staleness": limit, "retries": 0})
    source = PrometheusSource.from_settings(settings, {"train": 'sum(demand{namespace="train"})'})
    start = datetime(2026, 1, 5, 12, 0, 7, tzinfo=UTC)
    unavailable = 0
    for minute in range(60):
        now = start + timedelta(minutes=minute)
        try:
            source.fetch([DemandClass("train")], now - timedelta(hours=2), now, step)
        except MetricsUnavailable:
            unavailable += 1
    return unavailable


def test_below_a_step_a_series_answered_on_every_step_reads_as_stale(prometheus: FakePrometheusApi) -> None:
    step = timedelta(minutes=5)
    assert _unavailable_ticks(prometheus, "1ms", step) == 60
    # The tick at minute m (7 s past it) reads a newest step that started m % 5 minutes and 7 s before it.
    older_than_a_minute = sum(timedelta(minutes=m % 5, seconds=7) > timedelta(minutes=1) for m in range(60))
    assert _unavailable_ticks(prometheus, "1m", step) == older_than_a_minute
    settings = settings_from_mapping({**BASE, "prometheus": {"url": URL, "max_staleness": "5m"}})
    assert settings.prometheus is not None
    assert settings.prometheus.max_staleness == settings.forecast.step
    assert _unavailable_ticks(prometheus, "5m", step) == 0
