"""A stockout alert over many failed units, each with its own message (GKE's name the instance, a queued resource's
error may name its request), still reaches Slack saying what the agent did and what to do. The summary quoted every
distinct message before "removed them, backing off ..." and the quota advice: 40 messages made a summary of 4,671
characters, and Slack's 3,000-character cut of the section text and of the fallback line dropped both. The summary now
quotes the first message and counts the rest, which the ``error`` detail holds. The real tpu_v2 client against
``tests.fakes.tpu_api``, the agent's removal of failed units, and the real slack_sdk client posting to the local
webhook receiver."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from agent.executor import clear_failed_units
from agent.executor_failures import QUOTA_ADVICE, QUOTED_MAX, _quoted
from agent.notify.slack import build_slack_notifier
from agent.planning import PlannerMemory
from config.alerts import AlertSettings
from models import AcceleratorFamily, AlertEvent, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.contract.harnesses import POOL, QUEUED
from tests.fakes.fixtures import google_clients
from tests.fakes.slack_receiver import SlackReceiver
from tests.fakes.tpu_api import QUOTA_MESSAGE, STOCKOUT_MESSAGE, FakeTpuApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=20)
FAILED = 40
SPEC = PoolSpec(
    POOL, PoolKind.TPU_QUEUED_RESOURCE, CapacityTier.SPOT, AcceleratorFamily.TPU, 8, 0, FAILED, 8.0, LEAD, ("tpu",)
)
# Where the agent cuts a section's text (Slack's limit for a section block's text, Block Kit reference "Section
# block") and the fallback line (agent.notify.slack_message).
SLACK_TEXT_MAX = 3000


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


def _alert(tpu_api: FakeTpuApi, message: str) -> AlertEvent:
    """``FAILED`` queued resources, each failed with ``message`` naming its own request; the agent removes them."""
    clock = SimulatedClock(T0)
    tpu_api.clock = clock.now
    actuator = CloudTpuQueuedResourceActuator(
        google_clients(tpu_api.url).tpu, "test-project", [QUEUED], clock, {POOL: timedelta(hours=1)}
    )
    actuator.resize(POOL, FAILED, "up")
    clock.advance(timedelta(minutes=2))
    for index in range(FAILED):
        tpu_api.set_state(f"v5e-{index}", "FAILED", error=f"{message} (request v5e-{index})")
    (pool,) = actuator.list_pools()
    assert (pool.failed_units, len(set(pool.failed_messages))) == (FAILED, FAILED)
    (alert,) = clear_failed_units({POOL: pool}, actuator, {POOL: SPEC}, PlannerMemory(), clock.now()).alerts
    return alert


def _posted(receiver: SlackReceiver, alert: AlertEvent) -> tuple[str, str]:
    """What the real Slack client posted of the alert: the summary's section text and the fallback text."""
    settings = AlertSettings.model_validate({"request_timeout": "2s"})
    slack = build_slack_notifier(settings, SimulatedClock(alert.at), {}, url=receiver.url)
    assert slack is not None
    assert slack.notify(alert)
    (payload,) = receiver.received
    return str(payload["blocks"][1]["text"]["text"]), str(payload["text"])


def test_forty_quota_messages_keep_the_back_off_and_the_advice_in_slack(
    tpu_api: FakeTpuApi, receiver: SlackReceiver
) -> None:
    alert = _alert(tpu_api, QUOTA_MESSAGE)
    assert alert.summary == (
        f"{FAILED} units of {POOL} failed after the request was accepted: {QUOTA_MESSAGE} (request v5e-0) and "
        f"{FAILED - 1} more (see error); removed them, backing off 20m and using the next pool. {QUOTA_ADVICE}"
    )
    assert alert.details["error"] == "; ".join(f"{QUOTA_MESSAGE} (request v5e-{i})" for i in range(FAILED))
    assert alert.details["action"] == QUOTA_ADVICE
    section, fallback = _posted(receiver, alert)
    for text in (section, fallback):
        assert len(text) < SLACK_TEXT_MAX
        assert "backing off 20m and using the next pool" in text
        assert "request a quota increase" in text


def test_forty_stockout_messages_keep_the_back_off_in_slack(tpu_api: FakeTpuApi, receiver: SlackReceiver) -> None:
    alert = _alert(tpu_api, STOCKOUT_MESSAGE)
    assert f"{STOCKOUT_MESSAGE} (request v5e-0) and {FAILED - 1} more (see error); removed them" in alert.summary
    assert "action" not in alert.details
    section, fallback = _posted(receiver, alert)
    for text in (section, fallback):
        assert text.endswith("backing off 20m and using the next pool")


@pytest.mark.parametrize(
    ("messages", "quoted"),
    [
        ((), ""),
        (("one",), "one"),
        (("one", "two", "three"), "one and 2 more (see error)"),
        (("x" * (QUOTED_MAX + 1),), "x" * (QUOTED_MAX - 3) + "... (see error)"),
        (("x" * (QUOTED_MAX + 1), "two"), "x" * (QUOTED_MAX - 3) + "... and 1 more (see error)"),
    ],
    ids=["none", "one", "three", "one-too-long", "too-long-and-another"],
)
def test_a_summary_quotes_the_first_message_and_counts_the_rest(messages: tuple[str, ...], quoted: str) -> None:
    assert _quoted(messages) == quoted
