"""The ``daemon`` section of the configuration: defaults, and every mistake reported with its key path."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.daemon.identity import lease_namespace, replica_identity
from config import settings_from_mapping
from config.daemon import LeaderElectionSettings
from models import ConfigError

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


def test_defaults_are_a_safe_two_replica_dry_run() -> None:
    daemon = settings_from_mapping(BASE).daemon
    assert daemon.mode == "dry-run"
    assert daemon.endpoints.port == 8080
    election = daemon.leader_election
    assert election.enabled
    assert (election.lease_duration, election.renew_deadline, election.retry_period) == (
        timedelta(seconds=15),
        timedelta(seconds=10),
        timedelta(seconds=2),
    )
    assert daemon.ready_bound(timedelta(seconds=60)) == timedelta(minutes=3)


@pytest.mark.parametrize(
    ("daemon", "key_path", "words"),
    [
        ({"mode": "yolo"}, "daemon.mode", "dry-run"),
        ({"leader_election": {"renew_deadline": "20s"}}, "daemon.leader_election", "shorter than lease_duration"),
        ({"leader_election": {"retry_period": "10s"}}, "daemon.leader_election", "shorter than renew_deadline"),
        ({"endpoints": {"port": 70000}}, "daemon.endpoints.port", "65535"),
        ({"endpoints": {"prot": 8080}}, "daemon.endpoints.prot", "unknown key"),
        ({"daily_report_at": "25:00"}, "daemon.daily_report_at", "pattern"),
    ],
)
def test_mistakes_name_their_key(daemon: dict[str, Any], key_path: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, "daemon": daemon})
    (problem,) = caught.value.problems
    assert problem.key_path == key_path
    assert words in problem.message


def test_identity_and_namespace_come_from_the_pod(tmp_path: Path) -> None:
    settings = LeaderElectionSettings()
    assert replica_identity(settings, {"POD_NAME": "leadtime-7c9-abcde"}) == "leadtime-7c9-abcde"
    assert replica_identity(settings, {})  # falls back to the host name
    missing = tmp_path / "absent"
    assert lease_namespace(settings, {"POD_NAMESPACE": "ops"}, missing) == "ops"
    (tmp_path / "ns").write_text("leadtime\n")
    assert lease_namespace(settings, {}, tmp_path / "ns") == "leadtime"
    assert lease_namespace(LeaderElectionSettings(lease_namespace="x"), {"POD_NAMESPACE": "ops"}, missing) == "x"
    assert lease_namespace(settings, {}, missing) == "default"
