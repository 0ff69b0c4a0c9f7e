"""A setting's duration is written back out as it was given: a fraction of a second is kept, not rounded. The
settings a simulation's results record (``Settings.model_dump(mode="json")``) had a ``retry_period`` of 0.5s as
``0s`` and a ``renew_deadline`` of 2.5s as ``2s``, so the recorded settings no longer loaded; a configuration error
naming a gap of such settings (``validate-config``) did the arithmetic on rounded values."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from config import settings_from_mapping
from config.durations import format_duration, parse_duration

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
ELECTION = {"lease_duration": "4s", "renew_deadline": "2.5s", "retry_period": "0.5s"}


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(milliseconds=500), "500ms"),
        (timedelta(seconds=1.5), "1.5s"),
        (timedelta(minutes=1, milliseconds=250), "1m0.25s"),
        (timedelta(hours=1, seconds=0.5), "1h0.5s"),
        (timedelta(microseconds=1), "0.001ms"),
        # whole seconds read as reports write them
        (timedelta(0), "0s"),
        (timedelta(seconds=45), "45s"),
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(days=7), "7d"),
    ],
)
def test_a_duration_is_written_as_it_reads_back(delta: timedelta, text: str) -> None:
    assert format_duration(delta) == text
    assert parse_duration(text) == delta


def test_recorded_settings_keep_fractions_and_load_back() -> None:
    settings = settings_from_mapping(
        {**BASE, "daemon": {"leader_election": ELECTION, "kubernetes": {"request_timeout": "1s"}}}
    )
    written = json.loads(json.dumps(settings.model_dump(mode="json")))
    election = written["daemon"]["leader_election"]
    assert (election["renew_deadline"], election["retry_period"]) == ("2.5s", "500ms")
    assert settings_from_mapping(written) == settings


def test_validate_config_names_the_gap_as_configured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**BASE, "daemon": {"leader_election": ELECTION}}))
    assert main(["validate-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "daemon.kubernetes.request_timeout (5s) must fit in" in err
    assert "(4s - 2.5s = 1.5s)" in err
