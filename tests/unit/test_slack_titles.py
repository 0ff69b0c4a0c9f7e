"""Every alert kind a pool or a drain raises has a Slack title of its own: a header that shows the kind's raw name
("drain-unfinished-pods") tells a person on call less than a sentence. The daemon's own kinds (leadership lost, the
daily report) carry their whole message in the summary and keep their name as the header."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.notify.slack_message import TITLES, blocks
from models import AlertEvent, AlertKind, Severity

DAEMON_OWN = {AlertKind.LEADERSHIP_LOST, AlertKind.DAILY_REPORT}


@pytest.mark.parametrize("kind", sorted(set(AlertKind) - DAEMON_OWN))
def test_the_kind_has_a_title_and_the_header_shows_it(kind: AlertKind) -> None:
    event = AlertEvent(kind, Severity.WARNING, datetime(2026, 3, 1, tzinfo=UTC), "pool gpu", "summary", {})

    header = blocks(event)[0]["text"]["text"]

    assert kind in TITLES, kind
    assert TITLES[kind] in header, header
