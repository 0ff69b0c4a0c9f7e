"""The loop's errors keep the logger operators filter on (``agent.loop``) after the loop's split: a refit that
fails in a tick and the alerts of a failed tick that cannot be delivered are logged there."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.conditions import ConditionTracker
from agent.model_refits import refit_in_tick
from agent.planning import PlannerMemory
from agent.tick_alerts import tell_failed
from models import AlertEvent, AlertKind, Severity

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class _WebhookDown:
    def notify(self, event: AlertEvent) -> bool:
        raise RuntimeError("webhook down")


def _out_of_memory(now: datetime) -> None:
    raise MemoryError("fit ran out of memory")


def test_a_refit_that_fails_in_a_tick_is_logged_by_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("ERROR"):
        assert refit_in_tick(_out_of_memory, NOW, NOW - timedelta(days=1), ["a"], {})
    assert [(r.name, r.levelname) for r in caplog.records] == [("agent.loop", "ERROR")]
    assert "refit failed in the tick" in caplog.records[0].getMessage()


def test_alerts_of_a_failed_tick_not_delivered_are_logged_by_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    event = AlertEvent(AlertKind.MISSING_DATA, Severity.WARNING, NOW, "demand class a", "no sample")
    with caplog.at_level("ERROR"):
        tell_failed(ConditionTracker(), PlannerMemory(), _WebhookDown(), NOW, [event])
    assert [(r.name, r.levelname) for r in caplog.records] == [("agent.loop", "ERROR")]
    assert "alerts of a failed tick not delivered: 1" in caplog.records[0].getMessage()
