"""Timeouts and intervals that break the daemon when zero or a fraction of a second are refused at load, naming
the key: a Slack request with a timeout of 0 always fails, a Kubernetes call given 0 has no timeout at all, and a
refit interval shorter than a tick has the scheduler run refits back to back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from config import settings_from_mapping
from models import ConfigError

BASE: dict[str, Any] = {
    "demand_classes": [{"name": "c"}],
    "pools": [
        {"id": "p", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
         "lead_time": "10m", "serves": ["c"]},
    ],
}  # fmt: skip


def _with(path: str, value: object, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """BASE with ``value`` at the dotted ``path`` (sections created as needed)."""
    raw: dict[str, Any] = {**BASE, **(extra or {})}
    *sections, key = path.split(".")
    target = raw
    for section in sections:
        target = target.setdefault(section, {})
    target[key] = value
    return raw


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        settings_from_mapping(raw, source="c.yaml")
    return [str(p) for p in refused.value.problems]


KEYS = [
    "alerts.request_timeout",
    "alerts.outage_backoff",
    "daemon.kubernetes.request_timeout",
    "forecast.refit_interval",
    "forecast.retrain_interval",
    "forecast.reselect_interval",
]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize(("value", "shown"), [(0, "0s"), ("0s", "0s"), ("1ms", "1ms"), (0.6, "600ms")])
def test_zero_or_less_than_a_second_is_refused_naming_the_key(key: str, value: object, shown: str) -> None:
    (problem,) = _problems(_with(key, value))
    assert problem.startswith(f"{key}: must be at least 1s, got {shown}")


@pytest.mark.parametrize(
    ("key", "seconds"),
    # 2s for the timeouts: a Kubernetes request must also fit in the lease's write window (5s by default); the
    # forecast intervals are at least a tick (1m by default).
    [(key, 2 if key.startswith(("alerts.", "daemon.")) else 90) for key in KEYS],
)
def test_a_second_or_more_is_read(key: str, seconds: int) -> None:
    settings = settings_from_mapping(_with(key, f"{seconds}s"))
    section: Any = settings
    for part in key.split("."):
        section = getattr(section, part)
    assert section == timedelta(seconds=seconds)


@pytest.mark.parametrize("key", ["refit_interval", "retrain_interval", "reselect_interval"])
def test_a_forecast_interval_shorter_than_a_tick_is_refused(key: str) -> None:
    raw = _with(f"forecast.{key}", "30s", {"loop": {"tick_interval": "1m"}})
    assert _problems(raw) == [f"forecast.{key}: must be at least one tick (loop.tick_interval, 1m), got 30s"]
    assert getattr(settings_from_mapping(_with(f"forecast.{key}", "1m")).forecast, key) == timedelta(minutes=1)


def test_a_longer_tick_refuses_the_default_refit_interval_until_it_is_set() -> None:
    assert _problems({**BASE, "loop": {"tick_interval": "2h"}}) == [
        "forecast.refit_interval: must be at least one tick (loop.tick_interval, 2h), got 1h",
        "alerts.dedup_window: must be longer than one tick (loop.tick_interval, 2h), got 1h: an alert that still "
        "holds at the next tick would be sent again at every tick",
    ]
    settings = settings_from_mapping(
        {
            **BASE,
            "loop": {"tick_interval": "2h"},
            "forecast": {"refit_interval": "2h"},
            "alerts": {"dedup_window": "3h"},
        }
    )
    assert settings.forecast.refit_interval == settings.loop.tick_interval
