"""The plan names the nodes a release drains, and the executor drains exactly those: on the fake APIs with the real
drainer. The nodes are the longest idle (as the agent observed them); one that is no longer idle when the executor
gets to it refuses the release, and nothing is cordoned."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta

import pytest
from kubernetes import client as k8s

from agent.executor import execute
from agent.loop import Agent
from agent.notify import RecordingNotifier
from models import ActionStatus, CapacityPlan, Drain, PoolDecision, Resize, drain_key
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, SPOT, Rig, live_agent
from tests.fakes import kube_objects as objs

MINUTE = timedelta(minutes=1)


def _two_idle_nodes(rig: Rig, kube: k8s.ApiClient) -> tuple[Agent, PoolDecision, str, str]:
    """Three on-demand nodes: one busy, ``older`` idle from the start, ``newer`` idle two minutes later. Demand
    needs two nodes. Returns the agent once both idle nodes are idle for the 10-minute window, with the pool's
    decision record of the tick before (held: nothing idle long enough yet)."""
    rig.add_pools(on_demand_nodes=3)
    busy, newer, older = rig.mirror.nodes(ON_DEMAND)
    for name, node in (("train-0", busy), ("train-1", newer)):
        rig.kube.put("pods", objs.pod(name, node, namespace=CLASS, accelerators=8))
    rig.prometheus.set_demand(CLASS, 16)
    agent = live_agent(rig, rig.settings(spot_max=0), kube, RecordingNotifier())
    agent.run_once(rig.clock.now())
    rig.clock.advance(2 * MINUTE)
    rig.kube.delete("pods", "train-1", CLASS)
    before = agent.run_once(rig.clock.now()).plan.decisions[ON_DEMAND]
    assert before.stepped_units == 3 and before.holds  # stabilizing: neither node idle for the window yet
    rig.clock.advance(10 * MINUTE)
    return agent, before, older, newer


def _cordoned(rig: Rig, node: str) -> bool:
    return bool(rig.kube.get("nodes", node)["spec"].get("unschedulable"))  # type: ignore[index]


def test_the_plan_names_the_longest_idle_node_and_the_loop_drains_it(
    rig: Rig, kube_client: k8s.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    agent, _, older, newer = _two_idle_nodes(rig, kube_client)
    caplog.set_level(logging.INFO, logger="agent.loop")
    caplog.clear()
    report = agent.run_once(rig.clock.now())
    decision = report.plan.decisions[ON_DEMAND]
    [release] = report.plan.resizes
    assert (release.from_units, release.to_units) == (3, 2)
    assert decision.nodes == (older,)
    assert decision.nodes_note == "chosen at plan time: the 1 longest idle of the nodes idle for 10m"
    assert report.plan.drains == (Drain(ON_DEMAND, older, release.reason, drain_key(release.key, older)),)
    assert [r.key for r in report.results] == [drain_key(release.key, older)]
    assert not _cordoned(rig, newer)
    # one log line per pool, rendered from its record, with the chain as structured fields
    # the structured fields are the record's attributes from ``extra``: read through vars(), as LogRecord declares none
    lines = {
        vars(r)["pool"]: r for r in caplog.records if r.name == "agent.loop" and r.getMessage().startswith("decision:")
    }
    assert sorted(lines) == sorted((SPOT, ON_DEMAND))
    line = lines[ON_DEMAND]
    assert line.getMessage() == f"decision: {release.reason}"
    fields = vars(line)
    chain = ("current", "bounded", "stepped", "target", "nodes")
    assert tuple(fields[name] for name in chain) == (3, 2, 2, 2, older)


def test_the_executor_drains_exactly_the_nodes_the_decision_names(rig: Rig, kube_client: k8s.ApiClient) -> None:
    # The drainer on its own would take the longest idle node (``older``); the decision names ``newer``.
    agent, before, older, newer = _two_idle_nodes(rig, kube_client)
    now = rig.clock.now()
    agent.drains.observe({s.pool_id: s for s in agent.parts.actuator.list_pools()}, now)  # type: ignore[union-attr]
    release = Resize(ON_DEMAND, 3, 2, "release one idle node", f"{ON_DEMAND}@{now.isoformat()}->2")
    decision = replace(before, holds=(), stepped_units=2, target_units=2, nodes=(newer,))
    plan = CapacityPlan(now, (release,), decisions={ON_DEMAND: decision})
    started = execute(plan, agent.parts.actuator, agent.pool_by_id, agent.memory, now, agent.drains)
    assert [(r.key, r.status) for r in started.results] == [(drain_key(release.key, newer), ActionStatus.STARTED)]
    rig.clock.advance(MINUTE)  # the drain's next step: the node read empty again, removed
    now = rig.clock.now()
    agent.drains.observe({s.pool_id: s for s in agent.parts.actuator.list_pools()}, now)  # type: ignore[union-attr]
    done = execute(CapacityPlan(now, ()), agent.parts.actuator, agent.pool_by_id, started.memory, now, agent.drains)
    assert [(r.key, r.status) for r in done.results] == [(drain_key(release.key, newer), ActionStatus.DONE)]
    deleting = [i.name for i in rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs[0].instances if i.action == "DELETING"]
    assert deleting == [newer]
    assert not _cordoned(rig, older)


def test_a_named_node_no_longer_idle_refuses_the_release_and_nothing_is_cordoned(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    agent, before, older, _ = _two_idle_nodes(rig, kube_client)
    now = rig.clock.now()
    agent.drains.observe({s.pool_id: s for s in agent.parts.actuator.list_pools()}, now)  # type: ignore[union-attr]
    release = Resize(ON_DEMAND, 3, 2, "release one idle node", f"{ON_DEMAND}@{now.isoformat()}->2")
    plan = CapacityPlan(now, (release,), decisions={ON_DEMAND: replace(before, nodes=(older,))})
    rig.kube.put("pods", objs.pod("train-2", older, namespace=CLASS, accelerators=8))  # work landed on it since
    refused = execute(plan, agent.parts.actuator, agent.pool_by_id, agent.memory, now, agent.drains)
    [result] = refused.results
    assert (result.key, result.status) == (release.key, ActionStatus.REJECTED)
    assert f"{older} of {ON_DEMAND} is no longer idle for 10m" in result.detail
    assert rig.kube.calls("patch", "nodes") == 0
