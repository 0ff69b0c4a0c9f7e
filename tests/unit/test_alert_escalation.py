"""De-duplication never swallows a higher severity: a condition told as a warning and then found critical is told
again at once, over the Slack notifier (real slack_sdk client, local webhook receiver) and the recording notifier;
and the drainer's warning about a pool's idle nodes has a subject of its own, so it and the executor's alerts about
the pool's changes do not silence each other."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from agent.drains import NodeDrains
from agent.executor import execute
from agent.notify.recording import RecordingNotifier
from agent.notify.slack import SlackNotifier, build_slack_notifier
from agent.planning import PlannerMemory
from config.alerts import AlertSettings
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import (
    AcceleratorFamily,
    AlertEvent,
    AlertKind,
    CapacityPlan,
    CapacityTier,
    PoolKind,
    PoolSpec,
    Resize,
    Severity,
)
from models.clock import SimulatedClock
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.slack_receiver import Answer, SlackReceiver

T0 = datetime(2024, 5, 1, tzinfo=UTC)
GPU = PoolSpec("gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 24.0,
               timedelta(minutes=10), ("a",))  # fmt: skip
SUMMARY = "State of tpu-v5e could not be read; holding it until it can"


def _slack(receiver: SlackReceiver, clock: SimulatedClock) -> SlackNotifier:
    settings = AlertSettings.model_validate({"request_timeout": "1s"})
    built = build_slack_notifier(settings, clock, {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url})
    assert built is not None
    return built


def _unreadable(severity: Severity, at: datetime, error: str) -> AlertEvent:
    return AlertEvent(AlertKind.POOL_UNREADABLE, severity, at, "tpu-v5e", SUMMARY, {"error": error})


def _posted(receiver: SlackReceiver) -> list[str]:
    return [str(post["text"]).split(" - ", 1)[0] for post in receiver.received]


def test_a_critical_alert_after_a_warning_of_the_same_condition_is_posted_and_silences_later_warnings() -> None:
    clock = SimulatedClock(T0)
    with SlackReceiver() as receiver:
        slack = _slack(receiver, clock)
        assert slack.notify(_unreadable(Severity.WARNING, T0, "HTTP 503"))
        for minutes, severity in [(5, Severity.CRITICAL), (10, Severity.WARNING), (15, Severity.CRITICAL)]:
            clock.advance(timedelta(minutes=5))
            slack.notify(_unreadable(severity, T0 + timedelta(minutes=minutes), "HTTP 403: permission denied"))
        assert _posted(receiver) == [
            "[WARNING] Pool state unreadable: holding: tpu-v5e",
            "[CRITICAL] Pool state unreadable: holding: tpu-v5e",
        ]
        assert "HTTP 403" in str(receiver.received[1]["blocks"])


def test_a_critical_alert_held_while_slack_is_down_is_not_replaced_by_a_later_warning() -> None:
    clock = SimulatedClock(T0)
    with SlackReceiver() as receiver:
        receiver.answer(Answer(503, "service_unavailable"))
        slack = _slack(receiver, clock)
        assert not slack.notify(_unreadable(Severity.CRITICAL, T0, "HTTP 403: permission denied"))
        clock.advance(timedelta(seconds=30))  # within the outage back-off: held with the critical one
        slack.notify(_unreadable(Severity.WARNING, clock.now(), "HTTP 503"))
        clock.advance(timedelta(minutes=1))
        slack.flush()
        # the attempt Slack answered 503, then its delivery; the warning is a repeat of what was delivered
        assert _posted(receiver) == ["[CRITICAL] Pool state unreadable: holding: tpu-v5e"] * 2
        assert slack.pending == ()


def test_the_recording_notifier_keeps_a_critical_alert_after_a_warning() -> None:
    recorder = RecordingNotifier()
    for minutes, severity in [(0, Severity.WARNING), (5, Severity.CRITICAL), (10, Severity.WARNING)]:
        recorder.notify(_unreadable(severity, T0 + timedelta(minutes=minutes), "x"))
    assert [e.severity for e in recorder.events] == [Severity.WARNING, Severity.CRITICAL]


def test_the_drainers_warning_about_idle_nodes_and_the_executors_about_failing_changes_are_both_posted(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient, gke_api: FakeGkeApi
) -> None:
    """A blip of the Kubernetes API while the drainer reads the pool's idle nodes, then an upgrade of its nodes that
    holds the pool's scale-up for its lead time: both are actuator failures of the same pool."""
    gke_api.add_pool("a100", nodes=2)
    for name in [i.name for m in gke_api.pools["a100"].migs for i in m.instances]:
        kube_api.put("nodes", objs.node(name, "a100"))
    clock = SimulatedClock(T0)
    kube_api.clock = clock.now
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, "projects/test-project/locations/us-central1/clusters/ml",
                                   [mapping], clock)  # fmt: skip
    drainer = KubernetesNodeDrainer(KubernetesApi(kube_client), clock, {"gpu": "a100"}, actuator, timedelta(minutes=15))
    drains = NodeDrains({"gpu": drainer}, timedelta(minutes=10))
    specs = {"gpu": GPU}
    gke_api.upgrade_nodes("a100")
    with SlackReceiver() as receiver:
        slack = _slack(receiver, clock)
        memory = PlannerMemory()
        for minute in range(11):
            now = clock.now()
            if minute == 0:
                kube_api.fail_next(1, 503, verb="list", resource="pods")
            _, observed = drains.observe({s.pool_id: s for s in actuator.list_pools()}, now)
            plan = CapacityPlan(now, (Resize("gpu", 2, 4, "16 chips queued", f"gpu@{now.isoformat()}"),))
            done = execute(plan, actuator, specs, memory, now, drains)
            memory = done.memory
            for event in (*observed, *done.alerts):
                slack.notify(event)
            clock.advance(timedelta(minutes=1))
        assert _posted(receiver) == [
            "[WARNING] Actuator failure: idle nodes of gpu",
            "[WARNING] Actuator failure: gpu",
        ]
        # what the plan does with the pool (it is still scaled up, as the plan beside it does), not "holding its size"
        assert "Idle nodes cannot be read: the pool is not shrunk for idleness" in str(receiver.received[0]["text"])
        assert "kept failing for 10m" in str(receiver.received[1]["text"])
