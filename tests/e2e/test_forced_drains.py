"""Forced releases (a budget's hard stop) carried out by the executor through the real drainer, on the fake APIs:
busy nodes are drained once the idle ones do not cover the release (their pods evicted through the Eviction API, so
disruption budgets still hold and a blocked drain goes on every tick), idle nodes go first, a release that is not
forced still refuses a busy node, and a budget's hard stop planned by the loop drains busy nodes end to end."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from kubernetes import client as k8s

from agent.executor import Execution, execute
from agent.loop import Agent
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from models import ActionStatus, CapacityPlan, LedgerEntry, PoolDecision, Resize, drain_key
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, Rig, live_agent
from tests.fakes import kube_objects as objs
from tests.fakes.kube_api import RequestRecord

MINUTE = timedelta(minutes=1)
TRAIN = {"app": "train"}
REASON = "budget hard stop: the money left pays for 2 units through the next tick"


def _loaded_pool(rig: Rig, kube: k8s.ApiClient, loads: list[list[int]]) -> tuple[Agent, list[str]]:
    """Three on-demand nodes (sorted by name); ``loads[i]`` lists the accelerators of each training pod on node
    ``i`` (pod ``train-<node>-<j>`` of a Job, label ``app: train``). The agent has observed the pool once."""
    rig.add_pools(on_demand_nodes=3)
    nodes = rig.mirror.nodes(ON_DEMAND)
    for node, pods in zip(nodes, loads, strict=True):
        for j, accelerators in enumerate(pods):
            pod = objs.pod(
                f"train-{node}-{j}", node, namespace=CLASS, accelerators=accelerators, labels=TRAIN, owner_kind="Job"
            )
            rig.kube.put("pods", pod)
    rig.prometheus.set_demand(CLASS, 16)
    agent = live_agent(rig, rig.settings(spot_max=0), kube, RecordingNotifier())
    _observe(agent, rig)
    return agent, nodes


def _observe(agent: Agent, rig: Rig) -> None:
    assert agent.drains is not None
    agent.drains.observe({s.pool_id: s for s in agent.parts.actuator.list_pools()}, rig.clock.now())


def _run(agent: Agent, rig: Rig, *resizes: Resize, named: tuple[str, ...] = ()) -> Execution:
    """One tick's execution of ``resizes`` (none: drains in progress go on), the on-demand pool's record naming
    ``named``."""
    now = rig.clock.now()
    decisions = {ON_DEMAND: _decision(named)} if named else {}
    done = execute(CapacityPlan(now, resizes, decisions=decisions), agent.parts.actuator, agent.pool_by_id,
                   agent.memory, now, agent.drains)  # fmt: skip
    agent.memory = done.memory
    return done


def _release(rig: Rig, from_units: int, to_units: int, *, forced: bool = True) -> Resize:
    key = f"{ON_DEMAND}@{rig.clock.now().isoformat()}->{to_units}"
    return Resize(ON_DEMAND, from_units, to_units, REASON, key, forced=forced)


def _decision(nodes: tuple[str, ...]) -> PoolDecision:
    return PoolDecision(ON_DEMAND, False, 10 * MINUTE, 8, 0, 8, 3, (), 2, 0, 0, 2, 2, 2, nodes=nodes)


def _evicted(rig: Rig) -> list[str]:
    return [r.name for r in rig.kube.requests if (r.verb, r.subresource) == ("create", "eviction")]


def _deleting(rig: Rig) -> list[str]:
    return [i.name for i in rig.gke.pools[NODE_POOLS[ON_DEMAND]].migs[0].instances if i.action == "DELETING"]


def _cordoned(rig: Rig, node: str) -> bool:
    return bool(rig.kube.get("nodes", node)["spec"].get("unschedulable"))  # type: ignore[index]


def test_a_forced_release_drains_the_least_loaded_busy_node_through_evictions(
    rig: Rig, kube_client: k8s.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    agent, (heavy, two_pods, light) = _loaded_pool(rig, kube_client, [[8], [1, 1], [2]])
    stale = _run(agent, rig, _release(rig, 4, 3))  # fresh state still wins over a forced release
    assert [r.status for r in stale.results] == [ActionStatus.REJECTED]
    assert rig.kube.calls("patch", "nodes") == 0

    caplog.set_level(logging.INFO, logger="agent.drains")
    release = _release(rig, 3, 2)
    key = drain_key(release.key, light)
    evicting = _run(agent, rig, release)
    assert [(r.key, r.status) for r in evicting.results] == [(key, ActionStatus.STARTED)]
    assert RequestRecord("create", "", "pods", "eviction", CLASS, f"train-{light}-0") in rig.kube.requests
    shutting_down = rig.kube.get("pods", f"train-{light}-0", CLASS)  # SIGTERM: it may save its work first
    assert shutting_down is not None and shutting_down["metadata"]["deletionGracePeriodSeconds"] == 30
    assert _deleting(rig) == []  # the node stays until its pod has stopped
    rig.clock.advance(MINUTE)  # past the pod's grace period: its kubelet has finished it
    _observe(agent, rig)
    done = _run(agent, rig)
    assert [(r.key, r.status) for r in done.results] == [(key, ActionStatus.DONE)]
    assert _evicted(rig) == [f"train-{light}-0"]  # waited for, not evicted again
    assert rig.kube.get("pods", f"train-{light}-0", CLASS) is None
    assert rig.kube.calls("delete", "pods") == 0  # evicted, never deleted by force
    assert _deleting(rig) == [light]
    assert not _cordoned(rig, heavy) and not _cordoned(rig, two_pods)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"draining busy node {light} of pool {ON_DEMAND}: {REASON}"]


def test_a_forced_drain_blocked_by_a_disruption_budget_goes_on_every_tick(rig: Rig, kube_client: k8s.ApiClient) -> None:
    agent, nodes = _loaded_pool(rig, kube_client, [[8], [8], [8]])
    budget = objs.pdb("train", TRAIN, namespace=CLASS, min_available=3, expected_pods=3)
    rig.kube.put("poddisruptionbudgets", budget, group="policy")
    release = _release(rig, 3, 2)
    key = drain_key(release.key, nodes[0])  # equal loads: the first by name

    first = _run(agent, rig, release)
    assert [(r.key, r.status) for r in first.results] == [(key, ActionStatus.STARTED)]
    assert _cordoned(rig, nodes[0]) and rig.kube.get("pods", f"train-{nodes[0]}-0", CLASS) is not None
    for _ in range(2):
        rig.clock.advance(MINUTE)
        _observe(agent, rig)
        waiting = _run(agent, rig)
        assert [(r.key, r.status) for r in waiting.results] == [(key, ActionStatus.STARTED)]
    assert _evicted(rig) == [f"train-{nodes[0]}-0"] * 3
    assert _deleting(rig) == []

    spare = objs.pod("train-spare", nodes[1], namespace=CLASS, labels=TRAIN, owner_kind="Job")
    rig.kube.put("pods", spare)  # 4 healthy
    rig.clock.advance(MINUTE)
    _observe(agent, rig)
    evicted = _run(agent, rig)
    assert [(r.key, r.status) for r in evicted.results] == [(key, ActionStatus.STARTED)]  # its pod shuts down
    assert _deleting(rig) == []
    rig.clock.advance(MINUTE)
    _observe(agent, rig)
    done = _run(agent, rig)
    assert [(r.key, r.status) for r in done.results] == [(key, ActionStatus.DONE)]
    assert _evicted(rig) == [f"train-{nodes[0]}-0"] * 4
    assert _deleting(rig) == [nodes[0]]
    assert agent.drains is not None and agent.drains.pending == ()


def test_a_forced_release_takes_an_idle_node_before_any_busy_one(
    rig: Rig, kube_client: k8s.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    # The idle node was seen idle just now (far from the window) and is not the first by name; the light busy
    # node would come first among the busy ones.
    agent, (heavy, idle, light) = _loaded_pool(rig, kube_client, [[8], [], [1]])
    caplog.set_level(logging.INFO, logger="agent.drains")
    release = _release(rig, 3, 2)
    started = _run(agent, rig, release)  # cordoned and empty: removed at the drain's next step
    assert [(r.key, r.status) for r in started.results] == [(drain_key(release.key, idle), ActionStatus.STARTED)]
    rig.clock.advance(MINUTE)
    _observe(agent, rig)
    done = _run(agent, rig)
    assert [(r.key, r.status) for r in done.results] == [(drain_key(release.key, idle), ActionStatus.DONE)]
    assert _evicted(rig) == []
    assert _deleting(rig) == [idle]
    assert not _cordoned(rig, heavy) and not _cordoned(rig, light)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_only_a_forced_release_drains_a_named_node_that_is_busy(rig: Rig, kube_client: k8s.ApiClient) -> None:
    agent, (idle, busy, _) = _loaded_pool(rig, kube_client, [[], [8], [8]])
    rig.clock.advance(10 * MINUTE)  # ``idle`` is idle for the window: a plain release may take it, not ``busy``
    _observe(agent, rig)
    plain = _release(rig, 3, 2, forced=False)
    refused = _run(agent, rig, plain, named=(busy,))
    [result] = refused.results
    assert (result.key, result.status) == (plain.key, ActionStatus.REJECTED)
    assert f"{busy} of {ON_DEMAND} is no longer idle for 10m" in result.detail
    assert rig.kube.calls("patch", "nodes") == 0

    forced = _release(rig, 3, 2)
    evicting = _run(agent, rig, forced, named=(busy,))
    assert [(r.key, r.status) for r in evicting.results] == [(drain_key(forced.key, busy), ActionStatus.STARTED)]
    rig.clock.advance(MINUTE)  # its pod has shut down
    _observe(agent, rig)
    done = _run(agent, rig)
    assert [(r.key, r.status) for r in done.results] == [(drain_key(forced.key, busy), ActionStatus.DONE)]
    assert _evicted(rig) == [f"train-{busy}-0"]
    assert _deleting(rig) == [busy]
    assert not _cordoned(rig, idle)


def test_a_budget_hard_stop_drains_busy_nodes_through_the_whole_loop(rig: Rig, kube_client: k8s.ApiClient) -> None:
    # Three busy on-demand nodes at 29.36 USD per node-hour; a tick is a minute. With 2.00 USD left in the month
    # the next tick (billed for the three nodes held: 1.47 USD) leaves 0.53 USD, one node's minute (0.49 USD).
    rig.add_pools(on_demand_nodes=3)
    nodes = rig.mirror.nodes(ON_DEMAND)
    for node in nodes:
        train = objs.pod(f"train-{node}", node, namespace=CLASS, accelerators=8, labels=TRAIN, owner_kind="Job")
        rig.kube.put("pods", train)
    rig.prometheus.set_demand(CLASS, 24)
    document = rig.config_document(spot_max=0)
    document["budgets"] = [
        {"name": "team", "pools": [ON_DEMAND], "monthly_cap_usd": 1000.0, "commit_horizon": "24h"},
    ]
    agent = live_agent(rig, settings_from_mapping(document, source="e2e config"), kube_client, RecordingNotifier())
    now = rig.clock.now()
    agent.parts.ledger.record(LedgerEntry(ON_DEMAND, now - timedelta(hours=1), now, 3, 998.0))
    report = agent.run_once(now)
    [release] = report.plan.resizes
    assert (release.from_units, release.to_units, release.forced) == (3, 1, True)
    assert sorted(r.key.removeprefix(drain_key(release.key, "")) for r in report.results) == nodes[:2]
    assert all(r.status is ActionStatus.STARTED for r in report.results)  # their pods shut down first
    assert sorted(_evicted(rig)) == [f"train-{n}" for n in nodes[:2]]
    assert _deleting(rig) == []
    rig.clock.advance(MINUTE)
    finished = agent.run_once(rig.clock.now())
    statuses = {r.key: r.status for r in finished.results}
    assert [statuses.get(r.key) for r in report.results] == [ActionStatus.DONE] * 2
    assert sorted(_deleting(rig)) == nodes[:2]
