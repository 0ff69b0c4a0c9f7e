"""A Kubernetes request timeout that does not fit in ``lease_duration - renew_deadline`` is refused at load: a drain's
write the leader sends just before its renew deadline could otherwise still be on its way when a standby takes
over. The cloud writes' time limit is at most that gap (``LeaderElectionSettings.write_limit``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from config import settings_from_mapping
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


@pytest.mark.parametrize(
    ("daemon", "shown"),
    [
        ({"kubernetes": {"request_timeout": "6s"}}, "(6s) must fit in"),
        ({"kubernetes": {"request_timeout": "30s"}}, "(30s) must fit in"),
        ({"leader_election": {"renew_deadline": "12s"}}, "(15s - 12s = 3s)"),
    ],
)
def test_a_kubernetes_timeout_longer_than_the_lease_gap_is_refused_naming_both_keys(
    daemon: dict[str, Any], shown: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({**BASE, "daemon": daemon})
    (problem,) = caught.value.problems
    assert problem.key_path == "daemon"
    assert "daemon.kubernetes.request_timeout" in problem.message
    assert "daemon.leader_election.lease_duration - daemon.leader_election.renew_deadline" in problem.message
    assert shown in problem.message


@pytest.mark.parametrize(
    "daemon",
    [
        {},  # 5s in 15s - 10s
        {
            "kubernetes": {"request_timeout": "2s"},
            "leader_election": {"lease_duration": "4s", "renew_deadline": "2s", "retry_period": "1s"},
        },
        {"kubernetes": {"request_timeout": "30s"}, "leader_election": {"enabled": False}},  # one replica: no standby
    ],
)
def test_a_timeout_that_fits_loads(daemon: dict[str, Any]) -> None:
    loaded = settings_from_mapping({**BASE, "daemon": daemon}).daemon
    election = loaded.leader_election
    assert (
        not election.enabled or loaded.kubernetes.request_timeout <= election.lease_duration - election.renew_deadline
    )
    assert loaded.kubernetes.request_timeout >= timedelta(seconds=1)
