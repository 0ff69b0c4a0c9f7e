"""Nodes being drained are billed until each drain deletes its node: the cloud's target still counts them. The
agent takes them out of the pool's target for the planner (``agent.drains``: they were already asked to go), and
the planner's budget figures counted billed units from that target, so two nodes of three draining (held by a
disruption budget) were projected at one node's price while the ledger charged three. Now the units taken out are
``PoolState.draining_units``, still in ``billed_units``. On the fake GKE and Kubernetes APIs with the real drainer
and the real loop."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from agent.notify import RecordingNotifier
from agent.planning.budget import Budget
from config import settings_from_mapping
from models import PoolState
from models.clock import SimulatedClock
from tests.e2e.rig import CLASS, ON_DEMAND, T0, NodeMirror, Rig, live_agent
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


def test_nodes_being_drained_count_in_the_budget_until_their_drains_delete_them(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    rig.add_pools(on_demand_nodes=3)
    busy, *idle = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train-0", busy, namespace=CLASS, accelerators=8, owner_kind="Job"))
    for node in idle:  # each drain waits on a budget that allows no eviction
        rig.kube.put("pods", objs.pod(f"web-{node}", node, namespace="web", labels=WEB, owner_kind="ReplicaSet"))
    rig.kube.put("poddisruptionbudgets", objs.pdb("web", WEB, namespace="web", min_available=2, expected_pods=2),
                 group="policy")  # fmt: skip
    rig.prometheus.set_demand(CLASS, 8)
    document = rig.config_document(spot_max=0)
    document["budgets"] = [{"name": "od", "pools": [ON_DEMAND], "monthly_cap_usd": 1_000_000.0}]
    agent = live_agent(rig, settings_from_mapping(document, source="e2e config"), kube_client, RecordingNotifier())
    assert agent.run_once(rig.clock.now()).plan.resizes == ()  # the idle nodes are seen idle from now
    rig.clock.advance(WINDOW)
    _release(agent, rig, 3, forced=False)
    _release(agent, rig, 2, forced=False)
    rig.clock.advance(MINUTE)
    now = rig.clock.now()

    tick = agent.run_once(now)

    assert tick.plan.resizes == ()
    assert agent.drains is not None and len(agent.drains.pending) == 2  # both drains still wait
    (snapshot,) = tick.plan.budgets
    hours = Budget("od", frozenset({ON_DEMAND}), 1.0).period(now).remaining(now).total_seconds() / 3600.0
    # the busy node to the period's end and the two draining for one more tick (the loop's), as the shed counts them
    # (counted at nothing, the projection was the busy node's alone; to the period's end, it was 3 nodes')
    tick_h = MINUTE.total_seconds() / 3600.0
    assert snapshot.projected_usd - snapshot.spent_usd == pytest.approx(NODE_HOUR * (hours + 2 * tick_h), abs=0.01)
    (decision,) = [d for p, d in tick.plan.decisions.items() if p == ON_DEMAND]
    assert decision.current_units == 1  # sizes still leave the draining nodes out


def test_billed_units_keep_the_draining_units() -> None:
    state = PoolState(ON_DEMAND, T0, ready_units=1, target_units=1, draining_units=2)
    assert state.billed_units == 3
