"""Every alert says which agent sent it: its mode, the cluster it acts on and its replica, in the Slack message's
context line and at the start of its fallback text, so that a shadow (dry-run) agent's alert in a channel shared
with production cannot be read as production's. Posted to a local webhook receiver through the Slack notifier."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.notify.origin import AlertOrigin, OriginNotifier, alert_origin
from agent.notify.recording import RecordingNotifier
from agent.notify.slack import build_slack_notifier
from config import settings_from_mapping
from config.alerts import AlertSettings
from models import AlertEvent, AlertKind, Severity
from models.clock import SimulatedClock
from tests.fakes.slack_receiver import SlackReceiver

NOW = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
GKE = {
    "project": "p",
    "location": "europe-west4",
    "cluster": "prod",
    "node_pools": [{"pool": "a100", "node_pool": "a100"}],
}
_POOL = {
    "kind": "gpu-node-pool",
    "chips_per_unit": 8,
    "max_units": 4,
    "price_per_chip_hour_usd": 1.0,
    "lead_time": "10m",
}


def _settings(**sections: Any) -> Any:
    return settings_from_mapping(
        {"demand_classes": [{"name": "a"}], "pools": [{**_POOL, "id": "a100", "serves": ["a"]}], **sections}
    )


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


def test_a_shadow_agents_alert_names_its_mode_cluster_and_replica_in_slack(receiver: SlackReceiver) -> None:
    clock = SimulatedClock(NOW)
    slack = build_slack_notifier(AlertSettings(), clock, {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url})
    assert slack is not None
    settings = _settings(cloud={**GKE, "cluster": "prod-gke"})
    notifier = OriginNotifier(slack, alert_origin(settings, "dry-run", "leadtime-shadow-0"))
    event = AlertEvent(AlertKind.PROJECTED_OVERSPEND, Severity.CRITICAL, NOW, "budget team (monthly)", "Projected.")
    assert notifier.notify(event)
    [message] = receiver.received
    assert message["text"] == (
        "[CRITICAL] (dry-run · cluster prod-gke · replica leadtime-shadow-0) Projected overspend: "
        "budget team (monthly) - Projected."
    )
    context = message["blocks"][-1]
    assert context["type"] == "context"
    assert context["elements"][0]["text"] == (
        "projected-overspend · critical · 2024-03-05 10:00:00 UTC · leadtime dry-run · cluster prod-gke · "
        "replica leadtime-shadow-0"
    )


def test_the_origin_is_not_part_of_the_condition() -> None:
    recording = RecordingNotifier()
    event = AlertEvent(AlertKind.MISSING_DATA, Severity.WARNING, NOW, "demand class a", "Holding pools")
    OriginNotifier(recording, AlertOrigin("enforce", "cluster prod-gke", "leadtime-0")).notify(event)
    OriginNotifier(recording, AlertOrigin("enforce", "cluster prod-gke", "leadtime-1")).notify(event)
    assert [e.origin for e in recording.events] == ["enforce · cluster prod-gke · replica leadtime-0"]


@pytest.mark.parametrize(
    ("sections", "replay", "cluster"),
    [
        pytest.param({"cloud": GKE}, None, "cluster prod", id="gke"),
        pytest.param(
            {
                "aws": {
                    "region": "us-east-1",
                    "cluster": "eks-prod",
                    "nodegroups": [{"pool": "a100", "nodegroup": "a100"}],
                }
            },
            None,
            "EKS cluster eks-prod",
            id="eks",
        ),
        pytest.param(
            {"aws": {"region": "us-east-1", "auto_scaling_groups": [{"pool": "a100", "group": "a100"}]}},
            None,
            "AWS us-east-1",
            id="auto scaling groups only",
        ),
        pytest.param({}, None, "no cloud cluster", id="none"),
        pytest.param(
            {"cloud": GKE},
            "/data/traces/demand.csv",
            "rehearsal of demand.csv (simulated cluster)",
            id="a rehearsal touches no cloud",
        ),
    ],
)
def test_the_cluster_an_agent_acts_on(sections: dict[str, Any], replay: str | None, cluster: str) -> None:
    assert alert_origin(_settings(**sections), "enforce", "r", replay) == AlertOrigin("enforce", cluster, "r")
