"""The open conditions a leader carries in the planner memory, with the daemon's adapter (``AgentLoopAdapter``) over
the real agent loop, a simulated cluster and a replayed trace, the memory in a store the replicas share:

* a new leader tells the inherited conditions that still hold again, though its predecessor raised them: an alert
  queued in the predecessor's notifier while Slack failed dies with the pod (the real Slack client against the local
  receiver);
* the leader's own conditions survive the stored memory being deleted or written back stale (an operator lifting a
  block), and a failed first read after leadership resumes (the state ConfigMap on the fake Kubernetes API, through
  the real kubernetes client): their ends are told once, when they end;
* a condition that holds does not rewrite the stored memory at every tick, so an operator's edit of the state
  ConfigMap (read before a leader tick, written after it, with the resourceVersion read) is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
from kubernetes import client as k8s

from actuators import SimulatedCluster
from agent.daemon.adapters import AgentLoopAdapter, PoolStateRecorder
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify.base import Notifier
from agent.notify.recording import RecordingNotifier
from agent.notify.slack import build_slack_notifier
from agent.sources.trace import TraceSource, read_trace
from agent.state import InMemoryStateStore, StateStore
from agent.state.configmap import KEY, KubernetesStateStore
from config import settings_from_mapping
from config.alerts import AlertSettings
from config.daemon import KubernetesApiSettings
from config.schema import Settings
from forecasting.factory import build_forecaster
from kube import kubernetes_api_client
from kube.api import ConfigMaps
from models import AlertEvent, AlertKind
from models.clock import SimulatedClock
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.slack_receiver import Answer, SlackReceiver

NOW = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
TICK = timedelta(minutes=5)


def _pool(name: str) -> dict[str, object]:
    return {
        "id": f"{name}-pool", "kind": "gpu-node-pool", "tier": "on-demand", "chips_per_unit": 8, "min_units": 0,
        "max_units": 8, "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": [name],
    }  # fmt: skip


SETTINGS = settings_from_mapping(
    {
        "demand_classes": [{"name": "train"}, {"name": "serve"}],
        "pools": [_pool("train"), _pool("serve")],
        "forecast": {"model": "persistence", "history": "1h", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
        "ledger": {"backend": "memory"},
    },
    source="test",
)


def _trace(path: Path, train_missing: tuple[datetime, datetime]) -> Path:
    """Both classes at 16 units every 5 minutes, train's samples missing within ``train_missing``."""
    rows = []
    for ts in pd.date_range(NOW - timedelta(hours=2), periods=60, freq="5min"):
        rows.append(("serve", ts, 16.0))
        if not train_missing[0] <= ts < train_missing[1]:
            rows.append(("train", ts, 16.0))
    frame = pd.DataFrame(rows, columns=["unique_id", "ds", "y"])
    frame.assign(ds=frame.ds.dt.strftime("%Y-%m-%dT%H:%M:%S%z")).to_csv(path / "trace.csv", index=False)
    return path / "trace.csv"


class _Leading:
    def is_leader(self, now: datetime) -> bool:
        return True


class Rig:
    def __init__(self, trace: Path) -> None:
        self.clock = SimulatedClock(NOW)
        self.cluster = SimulatedCluster(SETTINGS.pool_specs(), self.clock, {p.id: 0 for p in SETTINGS.pools})
        self.store = InMemoryStateStore("leadtime-a")
        self.trace = trace

    def replica(
        self, name: str, notifier: Notifier, settings: Settings = SETTINGS, store: StateStore | None = None
    ) -> AgentLoopAdapter:
        pools = PoolStateRecorder(self.cluster)
        source, model = TraceSource(read_trace(self.trace)), build_forecaster(settings.forecast)
        parts = AgentParts(source, model, pools, InMemoryLedger(), notifier)
        if store is None:
            store = self.store if name == "leadtime-a" else self.store.replica(name)
        adapter = AgentLoopAdapter(Agent(settings, parts, holder=name), pools, store, _Leading(), self.clock)
        adapter.resume()
        return adapter

    def play(self, adapter: AgentLoopAdapter, minutes: Sequence[int]) -> None:
        for minute in minutes:
            self.clock.set(NOW + timedelta(minutes=minute))
            self.cluster.advance(self.clock.now())
            adapter.run_once(self.clock.now())


def test_a_new_leader_tells_an_inherited_condition_its_predecessor_could_not_deliver(tmp_path: Path) -> None:
    rig = Rig(_trace(tmp_path, (NOW, NOW + timedelta(hours=3))))  # train's demand never comes back
    alerts = AlertSettings.model_validate({"request_timeout": "1s"})
    with SlackReceiver() as slack_a, SlackReceiver() as slack_b:
        slack_a.answer(*[Answer(status=503, body="service unavailable")] * 50)
        a_notifier = build_slack_notifier(alerts, rig.clock, {"LEADTIME_SLACK_WEBHOOK_URL": slack_a.url})
        b_notifier = build_slack_notifier(alerts, rig.clock, {"LEADTIME_SLACK_WEBHOOK_URL": slack_b.url})
        assert a_notifier is not None and b_notifier is not None
        a = rig.replica("leadtime-a", a_notifier)
        rig.play(a, range(0, 25, 5))
        assert [e.subject for e in a_notifier.pending] == ["demand class train"]  # never delivered: A's pod dies
        b = rig.replica("leadtime-b", b_notifier)
        rig.play(b, range(30, 70, 5))
        texts = [post["text"] for post in slack_b.received]
    assert len(texts) == 1
    assert "Metrics missing or stale" in texts[0] and "demand class train" in texts[0]


GAP = (NOW, NOW + timedelta(minutes=25))  # train's demand unread from 10:00 to 10:25


def _told(events: Sequence[AlertEvent]) -> list[tuple[str, str, str]]:
    return [(e.at.strftime("%H:%M"), e.subject, "end" if e.resolved else "raised") for e in events]


def _leader(
    tmp_path: Path, train_missing: tuple[datetime, datetime]
) -> tuple[Rig, AgentLoopAdapter, RecordingNotifier]:
    rig = Rig(_trace(tmp_path, train_missing))
    told = RecordingNotifier(SETTINGS.alerts.dedup_window)
    return rig, rig.replica("leadtime-a", told), told


def test_deleting_the_stored_memory_to_unblock_a_pool_leaves_the_leaders_conditions_to_end(tmp_path: Path) -> None:
    rig, leader, told = _leader(tmp_path, (NOW, NOW))  # no demand missing
    leader.agent.memory = leader.agent.memory.block("train-pool", "403 Forbidden: container.nodePools.update denied")
    rig.play(leader, range(0, 30, 5))
    rig.store.document = None  # kubectl delete configmap leadtime-state, as the operations guide says
    rig.play(leader, range(30, 80, 5))
    blocked = [e for e in told.events if e.kind is AlertKind.ACTUATOR_FAILURE]
    assert _told(blocked) == [("10:00", "train-pool", "raised"), ("10:30", "train-pool", "end")]
    assert leader.agent.memory.blocked == {}


def test_a_stale_copy_written_back_brings_back_no_ended_condition(tmp_path: Path) -> None:
    rig, leader, told = _leader(tmp_path, GAP)
    rig.play(leader, range(0, 30, 5))
    stale = rig.store.document  # read at 10:25, while train's missing data is open
    rig.play(leader, range(30, 35, 5))
    rig.store.document = stale  # written back at 10:35 (a patch without the resourceVersion)
    rig.play(leader, range(35, 80, 5))
    missing = [e for e in told.events if e.kind is AlertKind.MISSING_DATA]
    assert _told(missing) == [("10:15", "demand class train", "raised"), ("10:30", "demand class train", "end")]
    assert leader.agent.conditions.active == ()


def test_a_leader_whose_first_read_after_resuming_fails_keeps_its_conditions(
    tmp_path: Path, kube_api: FakeKubeApi
) -> None:
    rig = Rig(_trace(tmp_path, GAP))
    told = RecordingNotifier(SETTINGS.alerts.dedup_window)
    api_client = kubernetes_api_client(KubernetesApiSettings(api_url=kube_api.url))
    config_maps = ConfigMaps(api_client, timedelta(seconds=2))
    store = KubernetesStateStore(config_maps, name="leadtime-state", namespace="leadtime", identity="leadtime-a")
    leader = rig.replica("leadtime-a", told, store=store)
    try:
        rig.play(leader, range(0, 25, 5))
        assert [s for _, s in leader.agent.conditions.active] == ["demand class train"]
        leader.resume()  # the lease was lost and taken back (an API blip): the memory is read again
        kube_api.fail_next(1, 503, verb="get", resource="configmaps")
        rig.play(leader, range(25, 80, 5))
    finally:
        api_client.close()
    missing = [e for e in told.events if e.kind is AlertKind.MISSING_DATA]
    assert _told(missing) == [("10:15", "demand class train", "raised"), ("10:30", "demand class train", "end")]


def test_an_edit_that_unblocks_a_pool_across_a_leader_tick_is_accepted(tmp_path: Path, kube_api: FakeKubeApi) -> None:
    rig = Rig(_trace(tmp_path, (NOW, NOW)))
    api_client = kubernetes_api_client(KubernetesApiSettings(api_url=kube_api.url))
    store = KubernetesStateStore(
        ConfigMaps(api_client, timedelta(seconds=2)), name="leadtime-state", namespace="leadtime", identity="leadtime-a"
    )
    leader = rig.replica("leadtime-a", RecordingNotifier(SETTINGS.alerts.dedup_window), store=store)
    leader.agent.memory = leader.agent.memory.block("train-pool", "403 Forbidden: container.nodePools.update denied")
    try:
        rig.play(leader, range(0, 15, 5))  # the pool's blocked alert open, raised at every tick
        core = k8s.CoreV1Api(api_client)
        read = core.read_namespaced_config_map("leadtime-state", "leadtime")  # kubectl edit reads ...
        document = json.loads(read.data[KEY])
        document["blocked"] = {}
        read.data = {KEY: json.dumps(document)}
        rig.play(leader, [15])  # ... the leader ticks ...
        core.replace_namespaced_config_map("leadtime-state", "leadtime", read)  # ... and the edit is written back
        rig.play(leader, [20])
    finally:
        api_client.close()
    assert leader.agent.memory.blocked == {}


def test_a_stalled_scale_up_whose_wait_grows_is_saved_once_when_it_opens(tmp_path: Path) -> None:
    rig = Rig(_trace(tmp_path, (NOW, NOW)))
    # the cloud is slower than the configured lead time (10m): both scale-ups stall, alerted after 20m
    slow = [replace(spec, lead_time=timedelta(hours=2)) for spec in SETTINGS.pool_specs()]
    rig.cluster = SimulatedCluster(slow, rig.clock, {p.id: 0 for p in SETTINGS.pools})
    told = RecordingNotifier(SETTINGS.alerts.dedup_window)
    leader = rig.replica("leadtime-a", told)
    rig.play(leader, range(0, 80, 5))  # 16 ticks, the summary saying 'still not ready after <wait>' at each
    stalled = [e for e in told.events if e.kind is AlertKind.STALLED_SCALE_UP]
    assert _told(stalled) == [("10:20", "pool serve-pool", "raised"), ("10:20", "pool train-pool", "raised")]
    # saved as the scale-ups' judgement is renewed (a quarter of their 20m allowance), never with a summary rewritten
    assert rig.store.load() == leader.agent.memory
    saved = leader.agent.memory.open_conditions[(AlertKind.STALLED_SCALE_UP, "pool train-pool")]
    assert saved.since == NOW + timedelta(minutes=20)
    assert "still not ready after 20m" in saved.summary  # the summary as it opened, not rewritten as the wait grows


def test_a_new_leader_tells_an_inherited_stockout_still_holding_before_its_end(tmp_path: Path) -> None:
    rig = Rig(_trace(tmp_path, (NOW, NOW)))
    alerts = AlertSettings.model_validate({"request_timeout": "1s"})
    with SlackReceiver() as slack_a, SlackReceiver() as slack_b:
        slack_a.answer(*[Answer(status=503, body="service unavailable")] * 50)
        a_notifier = build_slack_notifier(alerts, rig.clock, {"LEADTIME_SLACK_WEBHOOK_URL": slack_a.url})
        b_notifier = build_slack_notifier(alerts, rig.clock, {"LEADTIME_SLACK_WEBHOOK_URL": slack_b.url})
        assert a_notifier is not None and b_notifier is not None
        a = rig.replica("leadtime-a", a_notifier)
        rig.play(a, [0])
        rig.cluster.fail_in_flight("train-pool")  # the units asked for at 10:00 cannot be created: a stockout
        rig.play(a, [5])
        assert [(e.kind, e.subject) for e in a_notifier.pending] == [(AlertKind.STOCKOUT, "train-pool")]  # dies
        b = rig.replica("leadtime-b", b_notifier)
        rig.play(b, [10])  # train-pool backed off to 10:15: the stockout holds, raised by A only
        assert b.agent.memory.in_backoff("train-pool", NOW + timedelta(minutes=10))
        rig.play(b, range(15, 40, 5))
        texts = [post["text"] for post in slack_b.received if "stockout" in post["text"].lower()]
    assert len(texts) == 2
    assert "RESOLVED" not in texts[0] and "train-pool" in texts[0]
    assert "2024-03-05 10:05 UTC by the previous leader" in texts[0]
    assert "RESOLVED" in texts[1] and "train-pool" in texts[1]
