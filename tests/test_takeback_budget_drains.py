"""A scale-up first takes back the idle nodes this agent is draining (``NodeDrains.take_back``): they are billed until
their drains delete them, so serving again costs nothing more. The budget counted every unit of such a scale-up as
new: with one busy node and two idle ones draining, demand for three nodes was priced at five, and a cap with room
for three trimmed it to nothing ("allows 0 of 2 more units"), while the drains went on to delete both nodes and the
next plan bought them again, a lead time later. The drains of idle nodes are now ``PoolState.takeable_units`` and
only the units beyond them count as new; the drains of a budget's hard stop are not taken back and still do. On the
fake GKE and Kubernetes APIs with the real drainer and the real loop."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from agent.loop import Agent
from agent.notify import RecordingNotifier
from agent.planning.budget import Budget, billed_after, target_for
from config import settings_from_mapping
from models import PoolState, SkipReason
from models.clock import SimulatedClock
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, T0, NodeMirror, Rig, live_agent
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi
from tests.test_drains_takeover_forced_marks import WEB, WINDOW, _release

MINUTE = timedelta(minutes=1)
NODE_HOUR = 8 * 3.67  # USD: the rig's on-demand node, 8 GPUs at 3.67


@pytest.fixture
def rig(gke_api: FakeGkeApi, kube_api: FakeKubeApi, prometheus_api: FakePrometheusApi, tmp_path: Path) -> Rig:
    return Rig(gke_api, kube_api, prometheus_api, SimulatedClock(T0), NodeMirror(gke_api, kube_api), tmp_path)


def _cloud_target(rig: Rig) -> int:
    [mig] = rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs
    return mig.target_size


def _draining(rig: Rig, kube: k8s.ApiClient, forced: tuple[bool, bool]) -> Agent:
    """Three on-demand nodes, one running a training job (8 GPUs, the demand) and two idle, each with a web replica
    under a disruption budget that allows no eviction, and a monthly cap with room for 3.5 nodes to the period's end.
    Once idle for the window, both idle nodes are released (each drain a plain release or a hard stop's, as
    ``forced`` says) and wait on the disruption budget. Then demand for three nodes comes back."""
    rig.add_pools(on_demand_nodes=3)
    busy, *idle = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train-0", busy, namespace=CLASS, accelerators=8, owner_kind="Job"))
    for node in idle:
        rig.kube.put("pods", objs.pod(f"web-{node}", node, namespace="web", labels=WEB, owner_kind="ReplicaSet"))
    rig.kube.put("poddisruptionbudgets", objs.pdb("web", WEB, namespace="web", min_available=2, expected_pods=2),
                 group="policy")  # fmt: skip
    rig.prometheus.set_demand(CLASS, 8)
    document = rig.config_document(spot_max=0)
    hours = Budget("od", frozenset({ON_DEMAND}), 1.0).period(T0).remaining(T0).total_seconds() / 3600.0
    document["budgets"] = [{"name": "od", "pools": [ON_DEMAND], "monthly_cap_usd": NODE_HOUR * hours * 3.5}]
    agent = live_agent(rig, settings_from_mapping(document, source="e2e config"), kube, RecordingNotifier())
    assert agent.run_once(rig.clock.now()).plan.resizes == ()  # the idle nodes are seen idle from now
    rig.clock.advance(WINDOW)
    _release(agent, rig, 3, forced=forced[0])
    _release(agent, rig, 2, forced=forced[1])
    rig.clock.advance(MINUTE)
    assert agent.drains is not None and len(agent.drains.pending) == 2
    rig.prometheus.set_demand(CLASS, 24)
    return agent


def test_a_tight_cap_lets_a_scale_up_take_back_the_idle_nodes_being_drained(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    agent = _draining(rig, kube_client, forced=(False, False))
    nodes = set(rig.mirror.nodes(ON_DEMAND))

    tick = agent.run_once(rig.clock.now())

    assert [(r.from_units, r.to_units) for r in tick.plan.resizes] == [(1, 3)]
    assert [s for s in tick.plan.skips if s.reason is SkipReason.BUDGET] == []
    [result] = [r for r in tick.results if r.key == tick.plan.resizes[0].key]
    assert len(result.taken_back) == 2
    assert agent.drains is not None and agent.drains.pending == ()
    assert _cloud_target(rig) == 3 and set(rig.mirror.nodes(ON_DEMAND)) == nodes  # nothing bought, nothing deleted
    (snapshot,) = tick.plan.budgets
    now = rig.clock.now()
    hours = Budget("od", frozenset({ON_DEMAND}), 1.0).period(now).remaining(now).total_seconds() / 3600.0
    assert (snapshot.projected_usd - snapshot.spent_usd) / (NODE_HOUR * hours) == pytest.approx(3, abs=0.01)


def test_the_drains_of_a_hard_stop_are_not_taken_back_and_their_units_count_as_new(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    agent = _draining(rig, kube_client, forced=(True, True))

    tick = agent.run_once(rig.clock.now())

    assert tick.plan.resizes == ()  # 1->3 would bill 5 nodes: the cap has room for 3.5
    [skip] = [s for s in tick.plan.skips if s.reason is SkipReason.BUDGET]
    assert "allows 0 of 2 more units (1->3 asked, trimmed to 1->1; 3 units billed with 2 being drained)" in skip.detail
    assert agent.drains is not None and len(agent.drains.pending) == 2 and _cloud_target(rig) == 3


def test_one_idle_drain_and_one_forced_take_back_the_idle_node_alone(rig: Rig, kube_client: k8s.ApiClient) -> None:
    agent = _draining(rig, kube_client, forced=(False, True))
    assert agent.drains is not None
    [forced_node] = [p.node for p in agent.drains.pending if p.forced]

    tick = agent.run_once(rig.clock.now())

    assert [(r.from_units, r.to_units) for r in tick.plan.resizes] == [(1, 2)]  # 1->3 would bill 4
    [result] = [r for r in tick.results if r.key == tick.plan.resizes[0].key]
    assert len(result.taken_back) == 1 and forced_node not in result.taken_back
    assert [p.node for p in agent.drains.pending] == [forced_node]
    assert _cloud_target(rig) == 3  # the busy node, the one taken back and the one still draining


def test_billed_after_and_target_for_take_back_before_they_buy() -> None:
    state = PoolState(ON_DEMAND, T0, ready_units=1, target_units=1, draining_units=2, takeable_units=1)
    assert state.billed_units == 3
    assert [billed_after(state, to) for to in range(5)] == [2, 3, 3, 4, 5]
    assert [target_for(state, billed) for billed in range(2, 6)] == [0, 2, 3, 4]
    for billed in range(3, 6):
        assert billed_after(state, target_for(state, billed)) == billed
