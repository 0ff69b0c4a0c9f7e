"""The fallback text of a Slack message (the notification's line, and what a client without blocks shows) is read by
Slack as mrkdwn, as the blocks are: its control characters ``&``, ``<``, ``>`` are escaped (Slack's formatting
reference, "Escaping text"), so an error quoting ``<`` or ``<!here>`` is shown as written, never taken for a link or
a mention of the whole channel; and the cut to Slack's 3,000 characters comes after the escape, never splitting one.
Sent by the real notifier (slack_sdk) to a local webhook receiver."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from agent.notify.slack import SlackNotifier, build_slack_notifier
from config.alerts import AlertSettings
from models import AlertEvent, AlertKind, Severity
from models.clock import SimulatedClock
from tests.fakes.slack_receiver import SlackReceiver

T0 = datetime(2024, 5, 1, tzinfo=UTC)
ERROR = "TypeError: '<' not supported between 'NoneType' and 'int' <!here> & co"


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


def _notifier(receiver: SlackReceiver) -> SlackNotifier:
    settings = AlertSettings.model_validate({"request_timeout": "2s"})
    built = build_slack_notifier(settings, SimulatedClock(T0), {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url})
    assert built is not None
    return built


def test_the_fallback_text_is_escaped_as_the_blocks_are(receiver: SlackReceiver) -> None:
    event = AlertEvent(AlertKind.TICK_FAILED, Severity.CRITICAL, T0, "tick <a> & <b>", ERROR)
    assert _notifier(receiver).notify(event)

    (sent,) = receiver.received
    escaped = "TypeError: '&lt;' not supported between 'NoneType' and 'int' &lt;!here&gt; &amp; co"
    assert sent["text"] == f"[CRITICAL] Tick failed: pools held: tick &lt;a&gt; &amp; &lt;b&gt; - {escaped}"
    assert sent["blocks"][1]["text"]["text"] == f"*tick &lt;a&gt; &amp; &lt;b&gt;*\n{escaped}"


@pytest.mark.parametrize("padding", range(5))
def test_the_cut_comes_after_the_escape_and_splits_none(receiver: SlackReceiver, padding: int) -> None:
    """A summary of ampersands, each five characters once escaped: whatever the cut's offset, it ends on a whole
    escape."""
    event = AlertEvent(AlertKind.TICK_FAILED, Severity.WARNING, T0, "tick" + "x" * padding, "&" * 3000)
    assert _notifier(receiver).notify(event)

    (sent,) = receiver.received
    text = str(sent["text"])
    assert len(text) <= 3000 and text.endswith("&amp;…")
    assert text.split(" - ", 1)[1].removesuffix("…") == "&amp;" * text.count("&amp;")
