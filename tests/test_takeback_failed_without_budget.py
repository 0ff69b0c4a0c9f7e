"""A scale-up whose take-back of idle draining nodes fails holds units back only for a budget that priced it. A
budget counts those nodes as billed already and prices the scale-up at the units beyond them, so when the drains
cannot be ended the executor buys no more than the budget counted as new (``test_takeback_failed_budget``). A pool
in no budget has no cap to keep: holding its units back only left its demand waiting on drains that go on (every
tick planned 1 -> 3 and was rejected, '2 of the planned 2 units wait for a later plan'). It now buys what it could
not take back, as it did before caps were kept. On the fake GKE and Kubernetes APIs with the real drainer and loop."""

from __future__ import annotations

from kubernetes import client as k8s

from agent.loop import Agent
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from models import ActionStatus
from tests.e2e.rig import CLASS, ON_DEMAND, Rig, live_agent
from tests.fakes import kube_objects as objs
from tests.test_drains_takeover_forced_marks import WEB, WINDOW, _release
from tests.test_takeback_budget_drains import MINUTE, _cloud_target, rig

__all__ = ["rig"]


def _draining_without_budget(rig: Rig, kube: k8s.ApiClient) -> Agent:
    """Three on-demand nodes in no budget, one running a training job (8 GPUs, the demand) and two idle, each with a
    web replica under a disruption budget that allows no eviction; both idle nodes are released and their drains
    wait on it. Then demand for three nodes comes back."""
    rig.add_pools(on_demand_nodes=3)
    busy, *idle = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train-0", busy, namespace=CLASS, accelerators=8, owner_kind="Job"))
    for node in idle:
        rig.kube.put("pods", objs.pod(f"web-{node}", node, namespace="web", labels=WEB, owner_kind="ReplicaSet"))
    rig.kube.put("poddisruptionbudgets", objs.pdb("web", WEB, namespace="web", min_available=2, expected_pods=2),
                 group="policy")  # fmt: skip
    rig.prometheus.set_demand(CLASS, 8)
    document = rig.config_document(spot_max=0)
    document.pop("budgets", None)
    agent = live_agent(rig, settings_from_mapping(document, source="e2e config"), kube, RecordingNotifier())
    assert agent.run_once(rig.clock.now()).plan.resizes == ()
    rig.clock.advance(WINDOW)
    _release(agent, rig, 3, forced=False)
    _release(agent, rig, 2, forced=False)
    rig.clock.advance(MINUTE)
    assert agent.drains is not None and len(agent.drains.pending) == 2
    rig.prometheus.set_demand(CLASS, 24)
    return agent


def test_a_failed_take_back_on_a_pool_in_no_budget_buys_the_units(rig: Rig, kube_client: k8s.ApiClient) -> None:
    agent = _draining_without_budget(rig, kube_client)
    rig.kube.fail_next(5, 500, verb="patch", resource="nodes")  # the uncordons of the take-back fail

    tick = agent.run_once(rig.clock.now())

    [resize] = tick.plan.resizes
    assert (resize.from_units, resize.to_units) == (1, 3)
    assert tick.plan.decisions[ON_DEMAND].budgets == ()
    [result] = [r for r in tick.results if r.key == resize.key]
    assert result.status in (ActionStatus.DONE, ActionStatus.STARTED) and result.taken_back == ()
    assert "wait for a later plan" not in result.detail
    assert _cloud_target(rig) == 5  # the busy node, the two still draining and the two bought
    assert agent.drains is not None and len(agent.drains.pending) == 2


def test_the_pool_of_a_budget_names_it_on_its_decision(rig: Rig, kube_client: k8s.ApiClient) -> None:
    from tests.test_takeback_budget_drains import _draining

    agent = _draining(rig, kube_client, forced=(False, False))

    tick = agent.run_once(rig.clock.now())

    assert tick.plan.decisions[ON_DEMAND].budgets == ("od",)
