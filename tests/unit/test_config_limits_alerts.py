"""``alerts.dedup_window`` no longer than a tick is refused at load: an alert is a repeat only within the window,
so with a window of 0 (or of one tick) an alert that still held at the next tick was sent again at every tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.notify.recording import RecordingNotifier
from config import settings_from_mapping
from models import AlertEvent, ConfigError
from models.events import AlertKind, Severity

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


@pytest.mark.parametrize(
    ("extra", "shown"),
    [
        ({"alerts": {"dedup_window": 0}}, "(loop.tick_interval, 1m), got 0s"),
        ({"alerts": {"dedup_window": "500ms"}}, "(loop.tick_interval, 1m), got 500ms"),
        ({"alerts": {"dedup_window": "1m"}}, "(loop.tick_interval, 1m), got 1m"),
        ({"alerts": {"dedup_window": "5m"}, "loop": {"tick_interval": "5m"}}, "(loop.tick_interval, 5m), got 5m"),
    ],
)
def test_a_dedup_window_no_longer_than_a_tick_is_refused_naming_the_key(extra: dict[str, Any], shown: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, **extra})
    (problem,) = caught.value.problems
    assert problem.key_path == "alerts.dedup_window"
    assert f"must be longer than one tick {shown}" in problem.message


def test_a_dedup_window_is_checked_beside_other_problems_of_the_file() -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, "energy": {"pue": 0.5}, "alerts": {"dedup_window": 0}})
    assert {p.key_path for p in caught.value.problems} == {"energy.pue", "alerts.dedup_window"}


@pytest.mark.parametrize("window", ["61s", "1h"])
def test_a_window_longer_than_a_tick_loads_and_quiets_an_alert_at_the_next_tick(window: str) -> None:
    settings = settings_from_mapping({**BASE, "alerts": {"dedup_window": window}})
    tick = settings.loop.tick_interval
    notifier = RecordingNotifier(dedup_window=settings.alerts.dedup_window)
    start = datetime(2026, 1, 5, tzinfo=UTC)
    for n in range(10):
        notifier.notify(AlertEvent(AlertKind.MISSING_DATA, Severity.WARNING, start + n * tick, "train", "no demand"))
    assert len(notifier.events) < 10
    assert notifier.events[0].at == start
    assert all(b.at - a.at > tick for a, b in zip(notifier.events, notifier.events[1:], strict=False))


def test_the_default_window_loads() -> None:
    assert settings_from_mapping(BASE).alerts.dedup_window == timedelta(hours=1)
