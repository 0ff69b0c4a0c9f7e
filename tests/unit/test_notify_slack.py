"""The Slack notifier against a local webhook receiver, with the real slack_sdk client over HTTP."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from slack_sdk.http_retry import builtin_handlers

from agent.notify.slack import SlackNotifier, build_slack_notifier, webhook_url
from config.alerts import AlertSettings
from models import AlertEvent, AlertKind, ConfigError, Severity
from models.clock import SimulatedClock
from tests.fakes.slack_receiver import WEBHOOK_PATH, Answer, SlackReceiver

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
SECRET = WEBHOOK_PATH.rsplit("/", 1)[-1]


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The SDK's rate-limit handler sleeps Retry-After plus jitter; record it instead of waiting."""
    recorded: list[float] = []
    monkeypatch.setattr(builtin_handlers, "time", SimpleNamespace(sleep=recorded.append))
    return recorded


@pytest.fixture
def clock() -> SimulatedClock:
    return SimulatedClock(T0)


def notifier(url: str, clock: SimulatedClock, **overrides: object) -> SlackNotifier:
    settings = AlertSettings.model_validate({"request_timeout": "1s", **overrides})
    built = build_slack_notifier(settings, clock, {"LEADTIME_SLACK_WEBHOOK_URL": url})
    assert built is not None
    return built


def event(subject: str = "team-a", at: datetime = T0, kind: AlertKind = AlertKind.STOCKOUT) -> AlertEvent:
    return AlertEvent(
        kind, Severity.WARNING, at, subject, "no capacity <in zone> & retrying", {"pool": "tpu-v5e", "next": "a100"}
    )


def test_an_alert_arrives_as_block_kit_with_a_fallback_text(receiver: SlackReceiver, clock: SimulatedClock) -> None:
    assert notifier(receiver.url, clock).notify(event())
    [message] = receiver.received
    # Slack reads the fallback as mrkdwn too: escaped as the blocks are
    assert message["text"] == "[WARNING] Capacity stockout: team-a - no capacity &lt;in zone&gt; &amp; retrying"
    kinds = [block["type"] for block in message["blocks"]]
    assert kinds == ["header", "section", "section", "context"]
    assert message["blocks"][0]["text"]["text"] == ":warning: Capacity stockout"
    assert message["blocks"][1]["text"]["text"] == "*team-a*\nno capacity &lt;in zone&gt; &amp; retrying"
    assert [f["text"] for f in message["blocks"][2]["fields"]] == ["*pool*\ntpu-v5e", "*next*\na100"]
    assert "2024-03-05 10:00:00 UTC" in message["blocks"][3]["elements"][0]["text"]


def test_one_message_per_key_per_window(receiver: SlackReceiver, clock: SimulatedClock) -> None:
    slack = notifier(receiver.url, clock, dedup_window="30m")
    assert slack.notify(event())
    assert slack.notify(event(at=T0 + timedelta(minutes=29)))  # suppressed, still "handled"
    assert slack.notify(event("team-b", at=T0 + timedelta(minutes=29)))
    assert slack.notify(event(at=T0 + timedelta(minutes=30)))
    assert [m["blocks"][1]["text"]["text"].split("\n")[0] for m in receiver.received] == [
        "*team-a*",
        "*team-b*",
        "*team-a*",
    ]


def test_a_429_with_a_short_retry_after_is_retried_in_place(
    receiver: SlackReceiver, clock: SimulatedClock, sleeps: list[float]
) -> None:
    receiver.answer(Answer(429, "rate_limited", {"Retry-After": "2"}))
    assert notifier(receiver.url, clock, max_retry_after="5s").notify(event())
    assert len(receiver.received) == 2
    assert len(sleeps) == 1
    assert 2.0 <= sleeps[0] < 3.0


def test_a_429_asking_for_a_long_wait_holds_the_alert_until_then(
    receiver: SlackReceiver, clock: SimulatedClock, sleeps: list[float]
) -> None:
    receiver.answer(Answer(429, "rate_limited", {"Retry-After": "120"}))
    slack = notifier(receiver.url, clock, max_retry_after="5s")
    assert not slack.notify(event())
    assert sleeps == []
    assert [e.subject for e in slack.pending] == ["team-a"]
    clock.advance(timedelta(seconds=119))
    assert slack.flush() == 0
    assert len(receiver.received) == 1
    clock.advance(timedelta(seconds=1))
    assert slack.flush() == 1
    assert len(receiver.received) == 2
    assert slack.pending == ()


def test_a_server_error_is_logged_once_and_the_alerts_go_out_after_recovery(
    receiver: SlackReceiver, clock: SimulatedClock, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.answer(Answer(500, "internal_error"), Answer(503, "service_unavailable"))
    slack = notifier(receiver.url, clock, outage_backoff="1m")
    with caplog.at_level(logging.WARNING, logger="agent.notify.slack"):
        assert not slack.notify(event("a"))
        assert not slack.notify(event("b"))  # within the back-off: not even tried
        assert len(receiver.received) == 1
        clock.advance(timedelta(minutes=1))
        assert not slack.notify(event("c"))  # tried again, 503: back-off doubles
        clock.advance(timedelta(minutes=1))
        assert slack.flush() == 0
        clock.advance(timedelta(minutes=1))
        assert slack.flush() == 3
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert "not getting through (HTTP 500: internal_error)" in warnings[0]
    assert "getting through again after 0:03:00" in warnings[1]
    delivered = [m["blocks"][1]["text"]["text"].split("\n")[0] for m in receiver.received[2:]]
    assert delivered == ["*a*", "*b*", "*c*"]


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_slack_neither_raises_nor_waits(clock: SimulatedClock, sleeps: list[float]) -> None:
    slack = notifier(f"http://127.0.0.1:{_unused_port()}{WEBHOOK_PATH}", clock)
    assert not slack.notify(event())
    assert sleeps == []  # a refused connection is not retried in place: no back-off sleep
    assert len(slack.pending) == 1


def test_a_hanging_slack_is_given_up_after_the_request_timeout(
    receiver: SlackReceiver, clock: SimulatedClock, caplog: pytest.LogCaptureFixture
) -> None:
    hanging = threading.Event()
    receiver.answer(Answer(hold=hanging))
    slack = notifier(receiver.url, clock, request_timeout="1s")
    backstop = threading.Timer(60.0, hanging.set)  # a client without a timeout fails the test, it does not hang it
    backstop.start()
    try:
        with caplog.at_level(logging.WARNING, logger="agent.notify.slack"):
            assert not slack.notify(event())
        assert not hanging.is_set()  # the webhook never answered: the client gave up on its own timeout
    finally:
        hanging.set()
        backstop.cancel()
    assert receiver.count() == 1
    assert [e.subject for e in slack.pending] == ["team-a"]
    assert "not getting through" in caplog.text and "timed out" in caplog.text


def test_the_rate_limit_spreads_a_burst_over_minutes(receiver: SlackReceiver, clock: SimulatedClock) -> None:
    slack = notifier(receiver.url, clock, rate_limit_per_minute=2)
    results = [slack.notify(event(f"pool-{i}")) for i in range(5)]
    assert results == [True, True, False, False, False]
    clock.advance(timedelta(seconds=30))
    assert slack.flush() == 1
    clock.advance(timedelta(minutes=1))
    assert slack.flush() == 2
    assert len(receiver.received) == 5


def test_a_full_queue_drops_the_oldest(clock: SimulatedClock) -> None:
    slack = notifier(f"http://127.0.0.1:{_unused_port()}{WEBHOOK_PATH}", clock, max_pending=2)
    for i in range(4):
        slack.notify(event(f"pool-{i}"))
    assert [e.subject for e in slack.pending] == ["pool-2", "pool-3"]
    assert slack.dropped == 2


def test_the_webhook_url_is_never_logged(
    receiver: SlackReceiver, clock: SimulatedClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    dead = f"http://127.0.0.1:{_unused_port()}{WEBHOOK_PATH}"
    for url in (receiver.url, dead):
        slack = notifier(url, clock)
        slack.notify(event())
        slack.notify(event("other"))
        assert SECRET not in repr(slack)
    assert caplog.records  # the outage was logged ...
    assert all(SECRET not in r.getMessage() for r in caplog.records)  # ... without the secret


@pytest.mark.parametrize("mangle", [" ", "\t", "\n", "  \r\n"])
def test_a_whitespace_mangled_url_leaves_no_webhook_path_in_the_logs(
    receiver: SlackReceiver, clock: SimulatedClock, caplog: pytest.LogCaptureFixture, mangle: str
) -> None:
    """The client refuses the URL and its error quotes the path, escaped and split: none of it is logged."""
    caplog.set_level(logging.DEBUG)
    secret_at = receiver.url.index(SECRET)
    url = receiver.url[: secret_at + 6] + mangle + receiver.url[secret_at + 6 :]
    slack = notifier(url, clock, outage_backoff="1m")
    assert not slack.notify(event())
    clock.advance(timedelta(minutes=1))
    assert slack.flush() == 0
    assert receiver.received == []
    assert "not getting through (InvalidURL" in caplog.text  # the failure is logged, and says why ...
    pieces = [piece for piece in WEBHOOK_PATH.split("/") if piece and piece != "services"]
    pieces += [SECRET[:6], SECRET[6:]]
    leaked = [piece for piece in pieces if piece in caplog.text]
    assert leaked == []  # ... without any piece of the webhook path


def test_the_url_comes_from_a_mounted_file_before_the_environment(tmp_path: Path) -> None:
    secret = tmp_path / "webhook-url"
    secret.write_text("https://hooks.example.test/services/X\n")
    settings = AlertSettings(slack_webhook_url_file=str(secret))
    assert webhook_url(settings, {"LEADTIME_SLACK_WEBHOOK_URL": "https://other"}) == (
        "https://hooks.example.test/services/X"
    )
    assert webhook_url(AlertSettings(), {"LEADTIME_SLACK_WEBHOOK_URL": " https://env/x "}) == "https://env/x"
    assert webhook_url(AlertSettings(slack_webhook_url_env="MY_HOOK"), {"MY_HOOK": "https://mine"}) == "https://mine"
    assert webhook_url(AlertSettings(), {}) is None
    assert build_slack_notifier(AlertSettings(), SimulatedClock(T0), {}) is None


def test_url_problems_name_the_key_and_never_the_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"alerts\.slack_webhook_url_file: cannot read the webhook URL file"):
        webhook_url(AlertSettings(slack_webhook_url_file=str(tmp_path / "missing")), {})
    with pytest.raises(ConfigError, match="does not hold an http") as caught:
        webhook_url(AlertSettings(), {"LEADTIME_SLACK_WEBHOOK_URL": "hooks.slack/s3cr3t"})
    assert "s3cr3t" not in str(caught.value)


def test_a_message_slack_refuses_is_dropped_and_the_alerts_behind_it_go_out(
    receiver: SlackReceiver, clock: SimulatedClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A 400 (invalid_payload) refuses that message: retried, it would hold every later alert for ever."""
    receiver.answer(Answer(400, "invalid_payload"))
    slack = notifier(receiver.url, clock)
    with caplog.at_level(logging.ERROR, logger="agent.notify.slack"):
        assert not slack.notify(event("a"))
        assert slack.notify(event("b"))
    assert (slack.rejected, slack.pending) == (1, ())
    assert [m["blocks"][1]["text"]["text"].split("\n")[0] for m in receiver.received] == ["*a*", "*b*"]
    (error,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "refused the alert stockout a (HTTP 400: invalid_payload)" in error


@pytest.mark.parametrize(("status", "body"), [(410, "channel_is_archived"), (404, "channel_not_found")])
def test_a_webhook_slack_refuses_keeps_the_alerts_and_says_it_must_be_replaced(
    receiver: SlackReceiver, clock: SimulatedClock, caplog: pytest.LogCaptureFixture, status: int, body: str
) -> None:
    receiver.answer(Answer(status, body), Answer(status, body))
    slack = notifier(receiver.url, clock, outage_backoff="1m")
    with caplog.at_level(logging.WARNING, logger="agent.notify.slack"):
        assert not slack.notify(event("a"))
        clock.advance(timedelta(minutes=15))
        assert slack.flush() == 0  # the longest back-off (16 minutes) holds, not one minute
        assert len(receiver.received) == 1
        clock.advance(timedelta(minutes=1))
        assert slack.flush() == 0  # tried again: still refused
        clock.advance(timedelta(minutes=16))
        assert slack.flush() == 1  # a replaced webhook (here: the channel back) gets the kept alert out
    assert [a.subject for a in slack.pending] == []
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert (
        f"refuses the alert webhook (HTTP {status}: {body}): no alert gets through until the webhook is replaced"
        in (errors[0])
    )


def test_a_message_slack_refuses_is_not_posted_again_within_the_window(
    receiver: SlackReceiver, clock: SimulatedClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The same condition raised every tick: Slack refuses it once, and it is not re-posted (nor logged) each tick."""
    receiver.answer(*[Answer(400, "invalid_blocks")] * 3)
    slack = notifier(receiver.url, clock, dedup_window="30m")
    with caplog.at_level(logging.ERROR, logger="agent.notify.slack"):
        for minute in range(0, 30, 5):
            slack.notify(event("a", at=T0 + timedelta(minutes=minute)))
    assert (len(receiver.received), slack.rejected, slack.pending) == (1, 1, ())
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1
    slack.notify(event("a", at=T0 + timedelta(minutes=30)))  # a new window: tried again
    assert (len(receiver.received), slack.rejected) == (2, 2)


def test_a_condition_raised_again_keeps_its_place_so_a_full_queue_drops_it_before_a_one_off_alert(
    clock: SimulatedClock,
) -> None:
    slack = notifier(f"http://127.0.0.1:{_unused_port()}{WEBHOOK_PATH}", clock, max_pending=2)
    slack.notify(event("persisting"))
    slack.notify(event("one-off"))
    slack.notify(event("persisting", at=T0 + timedelta(minutes=5)))  # raised again on the next tick
    assert [(e.subject, e.at) for e in slack.pending] == [("persisting", T0 + timedelta(minutes=5)), ("one-off", T0)]
    slack.notify(event("new"))
    assert [e.subject for e in slack.pending] == ["one-off", "new"]  # the persisting one is raised again anyway
    assert slack.dropped == 1
