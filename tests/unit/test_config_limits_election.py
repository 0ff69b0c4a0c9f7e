"""Leader-election periods of milliseconds are refused at load, naming the key: a ``retry_period`` of 10ms had each
replica's election read and write the Lease as fast as the API server answered (165 requests a second to the local
one), and a ``renew_deadline`` within a fraction of a second of ``lease_duration`` or of ``retry_period`` left every
cloud write of the leader a time limit of that fraction (``LeaderElectionSettings.write_limit``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.daemon.lease import LeaseElector
from config import settings_from_mapping
from config.daemon import MIN_RETRY_PERIOD, KubernetesApiSettings, LeaderElectionSettings
from kube import Leases, kubernetes_api_client
from models import ConfigError
from tests.fakes.kube_api import FakeKubeApi

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


def _refused(election: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping(
            {**BASE, "daemon": {"leader_election": election, "kubernetes": {"request_timeout": "1s"}}}
        )
    (problem,) = caught.value.problems
    return problem.key_path, problem.message


@pytest.mark.parametrize(
    ("election", "shown"),
    [
        ({"retry_period": "10ms"}, "must be at least 0.5s, got 0.01s"),
        ({"retry_period": "0.4s"}, "must be at least 0.5s, got 0.4s"),
        ({"lease_duration": "3s", "renew_deadline": "2s", "retry_period": 0}, "must be at least 0.5s, got 0s"),
    ],
)
def test_a_retry_period_below_half_a_second_is_refused_naming_the_key(election: dict[str, Any], shown: str) -> None:
    key_path, message = _refused(election)
    assert key_path == "daemon.leader_election.retry_period"
    assert shown in message
    assert "two requests" in message


@pytest.mark.parametrize(
    ("election", "shown"),
    [
        ({"lease_duration": "10.5s"}, "lease_duration - renew_deadline (10.5s - 10s = 0.5s) must be at least 1s"),
        ({"retry_period": "9.5s"}, "renew_deadline - retry_period (10s - 9.5s = 0.5s) must be at least 1s"),
        (
            {"lease_duration": "30ms", "renew_deadline": "20ms", "retry_period": "500ms"},
            "retry_period must be shorter than renew_deadline",
        ),
    ],
)
def test_election_periods_that_leave_a_cloud_write_less_than_a_second_are_refused(
    election: dict[str, Any], shown: str
) -> None:
    key_path, message = _refused(election)
    assert key_path == "daemon.leader_election"
    assert shown in message


def test_the_gaps_are_checked_with_a_single_replica_too() -> None:
    """Without election the cloud writes still take the shorter gap as their time limit."""
    key_path, message = _refused({"enabled": False, "lease_duration": "10.2s"})
    assert (key_path, message.split(" must")[0]) == (
        "daemon.leader_election",
        "lease_duration - renew_deadline (10.2s - 10s = 0.2s)",
    )


@pytest.mark.parametrize(
    "election",
    [
        {},
        {"lease_duration": "3s", "renew_deadline": "2s", "retry_period": "0.5s"},
        {"lease_duration": "4s", "renew_deadline": "2s", "retry_period": "1s"},
    ],
)
def test_periods_at_or_above_the_limits_load_and_leave_writes_a_second_or_more(election: dict[str, Any]) -> None:
    settings = settings_from_mapping(
        {**BASE, "daemon": {"leader_election": election, "kubernetes": {"request_timeout": "1s"}}}
    )
    loaded = settings.daemon.leader_election
    assert loaded.retry_period >= timedelta(milliseconds=500)
    assert loaded.write_limit() >= timedelta(seconds=1)


def test_at_the_smallest_retry_period_a_leader_sends_at_most_four_requests_a_second() -> None:
    """What the limit rests on: each attempt of a leader, against the local API server, is one read and one write
    of the Lease, so the smallest period allowed sends 4 requests a second, within client-go's default 5."""
    api = FakeKubeApi()
    api.start()
    client = kubernetes_api_client(KubernetesApiSettings(api_url=api.url))
    settings = LeaderElectionSettings()
    elector = LeaseElector(
        Leases(client, timedelta(seconds=1)),
        name="leadtime",
        namespace="leadtime",
        identity="replica-a",
        lease_duration=settings.lease_duration,
        renew_deadline=settings.renew_deadline,
    )
    try:
        elector.step(datetime.now(UTC))  # takes the lease
        assert elector.is_leader()
        taken = len(api.requests)
        for _ in range(3):
            elector.step(datetime.now(UTC))  # renews it
        renewals = [r.verb for r in api.requests[taken:] if r.resource == "leases"]
    finally:
        client.close()
        api.stop()
    assert elector.is_leader()
    assert renewals == ["get", "update"] * 3
    per_second = len(renewals) / 3 / MIN_RETRY_PERIOD.total_seconds()
    assert per_second == 4.0
