"""The alerts and ledger configuration sections: defaults, units, unknown keys, and no secret in the file."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.ledger import InMemoryLedger
from agent.ledger.factory import open_ledger
from agent.ledger.sqlite import SqliteLedger
from config import settings_from_mapping
from config.ledger import LedgerSettings
from models import ConfigError

BASE: dict[str, Any] = {
    "demand_classes": [{"name": "c"}],
    "pools": [
        {"id": "p", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
         "lead_time": "10m", "serves": ["c"]},
    ],
}  # fmt: skip


def test_defaults_need_no_section() -> None:
    settings = settings_from_mapping(BASE)
    assert settings.alerts.slack_webhook_url_env == "LEADTIME_SLACK_WEBHOOK_URL"
    assert settings.alerts.dedup_window == timedelta(hours=1)
    assert settings.ledger.backend == "sqlite"


def test_durations_read_with_units() -> None:
    settings = settings_from_mapping(
        {**BASE, "alerts": {"dedup_window": "15m", "max_retry_after": "3s"}, "ledger": {"gap_after": "2m"}}
    )
    assert settings.alerts.dedup_window == timedelta(minutes=15)
    assert settings.alerts.max_retry_after == timedelta(seconds=3)
    assert settings.ledger.gap_after == timedelta(minutes=2)


@pytest.mark.parametrize(
    ("section", "key_path"),
    [
        pytest.param({"alerts": {"slack_webhook_url": "https://x"}}, "alerts.slack_webhook_url", id="no URL in YAML"),
        pytest.param({"alerts": {"rate_limit_per_minute": 0}}, "alerts.rate_limit_per_minute", id="rate"),
        pytest.param({"alerts": {"slack_webhook_url_env": "not a name"}}, "alerts.slack_webhook_url_env", id="env"),
        pytest.param({"ledger": {"backend": "postgres"}}, "ledger.backend", id="backend"),
    ],
)
def test_bad_values_are_reported_with_their_key_path(section: dict[str, Any], key_path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, **section})
    assert [p.key_path for p in caught.value.problems] == [key_path]


def test_open_ledger_follows_the_backend(tmp_path: Path) -> None:
    assert isinstance(open_ledger(LedgerSettings(backend="memory")), InMemoryLedger)
    ledger = open_ledger(LedgerSettings(path=str(tmp_path / "spend" / "ledger.sqlite")))
    assert isinstance(ledger, SqliteLedger)
    ledger.close()
    assert (tmp_path / "spend" / "ledger.sqlite").is_file()
