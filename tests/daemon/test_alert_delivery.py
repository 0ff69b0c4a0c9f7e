"""A tick never waits on Slack: the daemon's alerts go through the delivery queue the ``run`` command wires, to the
real slack_sdk client and the local webhook receiver. A tick that fails and alerts while the webhook hangs
finishes while the receiver still holds the request; the alert arrives once the webhook answers."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from actuators import SimulatedCluster
from agent.daemon.health import HealthState
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.service import Daemon, SoleReplicaElector
from agent.notify.queued import queued_slack_notifier
from config.alerts import AlertSettings
from models import MetricsUnavailable
from models.clock import SimulatedClock
from tests.daemon.fake_loop import FakeAgentLoop
from tests.daemon.replicas import POOL
from tests.fakes.slack_receiver import Answer, SlackReceiver

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
BOUND_S = 30.0  # generous: the webhook hangs for a minute, so a tick that waited on it fails here


def test_a_tick_that_alerts_does_not_wait_for_a_hanging_webhook() -> None:
    clock = SimulatedClock(T0)
    released = threading.Event()
    backstop = threading.Timer(60.0, released.set)
    backstop.start()
    with SlackReceiver() as receiver:
        receiver.answer(Answer(hold=released))
        settings = AlertSettings(request_timeout=timedelta(seconds=120))
        slack = queued_slack_notifier(settings, clock, {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url})
        assert slack is not None
        elector = SoleReplicaElector("replica-a")
        cluster = SimulatedCluster([POOL], clock)
        loop = FakeAgentLoop(cluster, POOL.pool_id, lambda _: 1, fail_with=MetricsUnavailable("gpu", "no data"))
        daemon = Daemon(
            loop,
            elector,
            clock=clock,
            metrics=DaemonMetrics(),
            health=HealthState(timedelta(minutes=3)),
            notifier=slack,
            mode="dry-run",
            contact_bound=timedelta(seconds=10),
        )
        daemon.elect()
        ticks_done = threading.Event()

        def two_ticks() -> None:
            daemon.tick()  # fails, alerts: the first post hangs in the webhook
            assert receiver.wait_for(1)
            clock.advance(timedelta(minutes=1))
            daemon.tick()  # fails and alerts again while the first post still hangs
            ticks_done.set()

        ticker = threading.Thread(target=two_ticks, daemon=True)
        ticker.start()
        assert ticks_done.wait(BOUND_S), "a tick waited on Slack"
        assert not released.is_set() and receiver.count() == 1
        released.set()
        assert slack.close(timedelta(seconds=BOUND_S))
        backstop.cancel()
    [message] = receiver.received  # the second alert is the same condition: de-duplicated, not sent twice
    assert "tick failed, pools held" in message["text"]
