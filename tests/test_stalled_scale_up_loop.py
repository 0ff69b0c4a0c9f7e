"""The stalled-scale-up alert through the real loop, on the fake GKE and Kubernetes APIs with the real drainer. The
loop handed the budget watch the pools as read before the executor acted: a scale-up was waited for only while its
pool's target held it (ready < asked <= target), and against the target from before the resize every scale-up was
dropped the tick it was recorded, so a node that never came up was never alerted on. The pools were also read in
the cloud's sizes, the nodes being drained counted as ready, while a scale-up is asked in the planner's, without
them. The watch now waits on the planner's states with the resizes the executor carried out."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from agent.loop import Agent
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from models import AlertEvent, AlertKind
from models.clock import SimulatedClock
from tests.e2e.rig import CLASS, ON_DEMAND, T0, NodeMirror, Rig, live_agent
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi
from tests.test_drains_takeover_forced_marks import WEB, WINDOW, _release

MINUTE = timedelta(minutes=1)


@pytest.fixture
def rig(gke_api: FakeGkeApi, kube_api: FakeKubeApi, prometheus_api: FakePrometheusApi, tmp_path: Path) -> Rig:
    return Rig(gke_api, kube_api, prometheus_api, SimulatedClock(T0), NodeMirror(gke_api, kube_api), tmp_path)


def _one_busy_node(rig: Rig, kube: k8s.ApiClient, stalled_after: float | None = None) -> Agent:
    """One on-demand node running a training job (8 GPUs, the demand)."""
    rig.add_pools(on_demand_nodes=1)
    (busy,) = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train-0", busy, namespace=CLASS, accelerators=8, owner_kind="Job"))
    rig.prometheus.set_demand(CLASS, 8)
    document = rig.config_document(spot_max=0)
    if stalled_after is not None:
        document["alerts"] = {"stalled_after_lead_times": stalled_after}
    return live_agent(rig, settings_from_mapping(document, source="e2e config"), kube, RecordingNotifier())


def _stalled(alerts: tuple[AlertEvent, ...]) -> list[AlertEvent]:
    return [a for a in alerts if a.kind is AlertKind.STALLED_SCALE_UP]


def _ticks_until_stalled(
    agent: Agent, rig: Rig, minutes: int
) -> tuple[datetime | None, datetime | None, AlertEvent | None]:
    """Tick once a minute for ``minutes`` minutes; when a scale-up was asked in them, and the first stalled alert."""
    asked: datetime | None = None
    for _ in range(minutes):
        now = rig.clock.now()
        tick = agent.run_once(now)
        if asked is None and any(r.pool_id == ON_DEMAND and r.is_scale_up for r in tick.plan.resizes):
            asked = now
        if stalled := _stalled(tick.alerts):
            return asked, now, stalled[0]
        rig.clock.advance(MINUTE)
    return asked, None, None


def test_a_node_that_never_comes_up_is_alerted_after_the_configured_lead_times(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    agent = _one_busy_node(rig, kube_client)
    agent.run_once(rig.clock.now())
    rig.clock.advance(MINUTE)
    rig.prometheus.set_demand(CLASS, 16)  # a second node's worth: the instance is created, its node never joins

    asked, at, alert = _ticks_until_stalled(agent, rig, 40)

    spec = agent.pool_by_id[ON_DEMAND]
    assert asked is not None and at == asked + spec.lead_time * agent.settings.alerts.stalled_after_lead_times
    assert alert is not None and alert.subject == f"pool {ON_DEMAND}"
    assert alert.details == {"ready units": "1", "asked": "1 -> 2 units"}
    assert [(p.target_units, p.ready_units) for p in agent.parts.actuator.list_pools() if p.pool_id == ON_DEMAND] == [
        (2, 1)
    ]


def test_a_node_that_comes_up_is_not_alerted(rig: Rig, kube_client: k8s.ApiClient) -> None:
    agent = _one_busy_node(rig, kube_client)
    agent.run_once(rig.clock.now())
    rig.clock.advance(MINUTE)
    rig.prometheus.set_demand(CLASS, 16)
    assert [(r.from_units, r.to_units) for r in agent.run_once(rig.clock.now()).plan.resizes] == [(1, 2)]
    rig.clock.advance(MINUTE)
    rig.settle()  # the instance comes up and its node joins

    asked, at, alert = _ticks_until_stalled(agent, rig, 40)

    assert (asked, at, alert) == (None, None, None)
    [cloud] = [p for p in agent.parts.actuator.list_pools() if p.pool_id == ON_DEMAND]
    assert (cloud.target_units, cloud.ready_units) == (2, 2)


def test_nodes_being_drained_do_not_stand_in_for_the_nodes_a_scale_up_asked_for(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    """One busy node and two idle ones a budget's hard stop is draining (the drains wait on a disruption budget and
    are not taken back): still ready in the cloud's count, but out of the planner's, in which the scale-up to two
    nodes is asked. The new node never comes up; the alert is raised after one lead time, within the drains' 15
    minutes."""
    rig.add_pools(on_demand_nodes=3)
    busy, *idle = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train-0", busy, namespace=CLASS, accelerators=8, owner_kind="Job"))
    for node in idle:
        rig.kube.put("pods", objs.pod(f"web-{node}", node, namespace="web", labels=WEB, owner_kind="ReplicaSet"))
    rig.kube.put("poddisruptionbudgets", objs.pdb("web", WEB, namespace="web", min_available=2, expected_pods=2),
                 group="policy")  # fmt: skip
    rig.prometheus.set_demand(CLASS, 8)
    document = rig.config_document(spot_max=0)
    document["alerts"] = {"stalled_after_lead_times": 1.0}
    agent = live_agent(rig, settings_from_mapping(document, source="e2e config"), kube_client, RecordingNotifier())
    agent.run_once(rig.clock.now())
    rig.clock.advance(WINDOW)
    _release(agent, rig, 3, forced=True)
    _release(agent, rig, 2, forced=True)
    rig.clock.advance(MINUTE)
    rig.prometheus.set_demand(CLASS, 16)

    asked, at, alert = _ticks_until_stalled(agent, rig, 14)

    assert asked is not None and at == asked + agent.pool_by_id[ON_DEMAND].lead_time  # not a tick before
    assert alert is not None and alert.details == {"ready units": "1", "asked": "1 -> 2 units"}
    assert agent.drains is not None and len(agent.drains.pending) == 2  # both drains still wait
    [cloud] = [p for p in agent.parts.actuator.list_pools() if p.pool_id == ON_DEMAND]
    assert (cloud.target_units, cloud.ready_units) == (4, 3)  # the draining nodes are ready in the cloud's count
