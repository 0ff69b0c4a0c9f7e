"""A TPU slice that was whole and fell short of hosts waits from the first read that found it short, across a restart
of the agent: whole live daemons (the real loop, the GKE slice adapter on the fake GKE and Compute Engine APIs, the
planner memory in the ConfigMap ``leadtime-state`` on the fake Kubernetes API), the first stopped halfway through the
slice's wait and a new one (a rollout: a new pod, a new adapter and loop) started on the same servers and memory.

Nothing in the cloud tells when such a slice fell short (``actuators.gke_tpu_slices``), so the time lived in the
adapter only and each restart started the wait again: restarted more often than the wait, the agent kept the slice,
billed and serving nothing, for ever. With the wait kept in the planner memory the slice is given up at T + wait.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from agent.daemon.live import live_parts
from agent.daemon.wiring import AssembledDaemon, assemble
from agent.ledger.sqlite import SqliteLedger
from agent.notify import RecordingNotifier
from agent.state.configmap import KEY
from config import settings_from_mapping
from config.schema import Settings
from models.clock import SimulatedClock
from tests.daemon.test_slice_release import CLASS, HOSTS
from tests.daemon.test_slice_release import _settings as slice_settings
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
POOL, SLICE = "v5e-slices", "v5e-0"
WAIT = timedelta(minutes=20)  # the group's lead time (10m) times alerts.stalled_after_lead_times (2.0)
STOCKOUT = "ZONE_RESOURCE_POOL_EXHAUSTED: the zone does not have enough resources available"


class Rig:
    def __init__(
        self, prometheus: FakePrometheusApi, gke: FakeGkeApi, kube: FakeKubeApi, client: k8s.ApiClient, tmp: Path
    ) -> None:
        self.clock = SimulatedClock(T0)
        self.gke, self.kube, self.client = gke, kube, client
        kube.clock = self.clock.now
        gke.add_pool(SLICE, nodes=HOSTS)  # whole, serving the one slice of demand
        for i in range(HOSTS):
            kube.put("nodes", objs.node(f"gke-ml-{SLICE}-{i}", SLICE, accelerators=4, resource=objs.TPU_RESOURCE))
        prometheus.set_demand(CLASS, 16)
        self.settings: Settings = settings_from_mapping(slice_settings(prometheus, gke, tmp), source="slice config")

    def start(self, pod: str) -> AssembledDaemon:
        """A new agent process: new adapters, a new loop, the same servers and state ConfigMap."""
        parts = live_parts(
            self.settings, "slice config", self.clock, RecordingNotifier(), self.client, CollectorRegistry()
        )
        daemon = assemble(self.settings, "enforce", parts, {"POD_NAME": pod, "POD_NAMESPACE": "leadtime"})
        daemon.endpoints.stop()
        daemon.daemon.elect()
        daemon.daemon.refit()
        return daemon

    def run_until(self, daemon: AssembledDaemon, at: datetime) -> None:
        """A tick every minute until ``at`` (included)."""
        while self.clock.now() < at:
            self.clock.advance(timedelta(minutes=1))
            daemon.daemon.elect()
            daemon.daemon.tick()

    def fall_short(self) -> None:
        """Two of the slice's hosts lost and recreated by a repair the zone has no room for, their Nodes gone."""
        for i, instance in enumerate(self.gke.pools[SLICE].migs[0].instances[:2]):
            instance.action, instance.error = "RECREATING", STOCKOUT
            self.kube.delete("nodes", f"gke-ml-{SLICE}-{i}")
        self.gke.report_error(SLICE, status="RUNNING_WITH_ERROR")

    def status(self) -> str:
        return self.gke.pools[SLICE].status

    def saved(self) -> dict[str, object]:
        config_map = k8s.CoreV1Api(self.client).read_namespaced_config_map("leadtime-state", "leadtime")
        saved: dict[str, object] = json.loads(config_map.data[KEY])
        return saved


def recover_whole(rig: Rig) -> None:
    """The slice recovered whole, as a multi-host slice is (tests/fakes/REFERENCE.md): every host recreated (a new
    instance, with a new id) and running, its Nodes registered again; GKE reports it RUNNING."""
    for instance in rig.gke.pools[SLICE].migs[0].instances:
        instance.action = "RECREATING"
        instance.action, instance.error = "NONE", ""
    rig.gke.report_error(SLICE, status="RUNNING")
    for i in range(HOSTS):
        rig.kube.put("nodes", objs.node(f"gke-ml-{SLICE}-{i}", SLICE, accelerators=4, resource=objs.TPU_RESOURCE))


def _rig(
    prometheus_api: FakePrometheusApi,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> Rig:
    return Rig(prometheus_api, gke_api, kube_api, kube_client, tmp_path)


def test_a_restart_halfway_through_the_wait_gives_the_slice_up_at_the_end_of_its_first_wait(
    prometheus_api: FakePrometheusApi,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> None:
    rig = _rig(prometheus_api, gke_api, kube_api, kube_client, tmp_path)
    first = rig.start("leadtime-0")
    rig.run_until(first, T0 + timedelta(minutes=3))
    short_at = T0 + timedelta(minutes=4)
    rig.fall_short()
    rig.run_until(first, short_at)  # the first read that finds it short
    rig.run_until(first, short_at + WAIT / 2 - timedelta(minutes=1))
    seen = short_at + WAIT / 4 + timedelta(minutes=1)  # the first read once the last seen is a quarter wait old
    saved = rig.saved()["slices_short_since"]
    assert isinstance(saved, dict)
    assert {k: saved[POOL][SLICE][k] for k in ("since", "seen")} == {
        "since": short_at.isoformat(),
        "seen": seen.isoformat(),
    }
    assert len(saved[POOL][SLICE]["hosts"]) == 2  # the ids of its two hosts that run
    first.daemon.stop_working()
    ledger = first.loop.agent.parts.ledger
    assert isinstance(ledger, SqliteLedger)
    ledger.close()  # the process ends: its ledger file's lock goes with it

    rig.clock.advance(timedelta(minutes=1))  # the old pod gone, its lease run out: the new one leads at once
    second = rig.start("leadtime-1")
    rig.run_until(second, short_at + WAIT - timedelta(minutes=1))
    assert rig.status() == "RUNNING_WITH_ERROR"  # still waited for, a minute before its wait ends
    rig.run_until(second, short_at + WAIT)
    assert rig.status() == "STOPPING"  # given up at T + wait (was T + wait/2 + wait): deleted, the group backed off
    backoff = rig.saved()["backoff_until"]
    assert isinstance(backoff, dict) and POOL in backoff
    rig.run_until(second, short_at + WAIT + timedelta(minutes=2))
    assert rig.saved()["slices_short_since"] == {}  # gone: out of the record
    second.daemon.stop_working()
