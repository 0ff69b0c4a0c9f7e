"""A scale-up whose take-back of idle draining nodes fails buys no more than its budget counted as new. The budget
counts those nodes as billed already (``PoolState.takeable_units``), so a scale-up onto them is priced at the units
beyond them; when the drains cannot be ended (an API error on the uncordon), the executor bought every unit it had
not taken back: with one busy node, two idle ones draining and a cap with room for 3.5 nodes, demand for three
nodes took the cloud's target to 5 and the next ticks projected 104,363.06 USD against a cap of 73,062.36 USD. The
scale-up now buys only what the budget counted as new and leaves the rest to the next plan, with a note saying so.
On the fake GKE and Kubernetes APIs with the real drainer and the real loop."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kubernetes import client as k8s

from agent.executor_resizes import Sent, held_for_take_back
from agent.planning.budget import Budget
from models import ActionStatus, PoolState, Resize
from tests.e2e.rig import ON_DEMAND, T0, Rig
from tests.test_takeback_budget_drains import MINUTE, NODE_HOUR, _cloud_target, _draining, rig

__all__ = ["rig"]


def _projected_nodes(rig: Rig, projected_usd: float, spent_usd: float) -> float:
    now = rig.clock.now()
    hours = Budget("od", frozenset({ON_DEMAND}), 1.0).period(now).remaining(now).total_seconds() / 3600.0
    return (projected_usd - spent_usd) / (NODE_HOUR * hours)


def test_a_failed_take_back_buys_nothing_the_budget_counted_as_taken_back(rig: Rig, kube_client: k8s.ApiClient) -> None:
    agent = _draining(rig, kube_client, forced=(False, False))
    rig.kube.fail_next(5, 500, verb="patch", resource="nodes")  # the uncordons of the take-back fail

    tick = agent.run_once(rig.clock.now())

    [resize] = tick.plan.resizes
    assert (resize.from_units, resize.to_units) == (1, 3)
    [result] = [r for r in tick.results if r.key == resize.key]
    assert result.status is ActionStatus.REJECTED and result.taken_back == ()
    assert (
        "took back 0 of the 2 draining units the plan counted on (their drains go on): 2 of the planned 2 units wait "
        "for a later plan" in result.detail
    )
    assert _cloud_target(rig) == 3  # the busy node and the two still draining: nothing bought
    assert agent.drains is not None and len(agent.drains.pending) == 2
    (snapshot,) = tick.plan.budgets
    assert _projected_nodes(rig, snapshot.projected_usd, snapshot.spent_usd) == pytest.approx(3, abs=0.01)


def test_the_next_tick_takes_the_nodes_back_and_stays_under_the_cap(rig: Rig, kube_client: k8s.ApiClient) -> None:
    agent = _draining(rig, kube_client, forced=(False, False))
    rig.kube.fail_next(5, 500, verb="patch", resource="nodes")
    agent.run_once(rig.clock.now())
    rig.clock.advance(MINUTE)

    tick = agent.run_once(rig.clock.now())

    [resize] = tick.plan.resizes
    [result] = [r for r in tick.results if r.key == resize.key]
    assert result.status is ActionStatus.DONE and len(result.taken_back) == 2
    assert _cloud_target(rig) == 3 and agent.drains is not None and agent.drains.pending == ()
    (snapshot,) = tick.plan.budgets
    assert snapshot.cap_usd is not None and snapshot.projected_usd <= snapshot.cap_usd
    assert _projected_nodes(rig, snapshot.projected_usd, snapshot.spent_usd) == pytest.approx(3, abs=0.01)


@pytest.mark.parametrize(
    ("to_units", "takeable", "taken", "held"),
    [
        (3, 2, 2, 0),  # every drain counted on taken back
        (3, 2, 0, 2),  # none taken back: none of the two is new
        (3, 2, 1, 1),  # one of two taken back: the other waits
        (4, 2, 0, 2),  # one unit beyond the drains is new and bought
        (4, 2, 1, 1),
        (2, 2, 0, 1),  # a scale-up of one onto two drains: nothing new
        (3, 0, 0, 0),  # no drain counted on: every unit is new
        (3, 1, 2, 0),  # more taken back than counted on: nothing held
    ],
)
def test_a_scale_up_holds_the_units_its_plan_counted_as_taken_back(
    to_units: int, takeable: int, taken: int, held: int
) -> None:
    planned = PoolState(ON_DEMAND, T0, ready_units=1, target_units=1, draining_units=2, takeable_units=takeable)
    cloud = replace(planned, ready_units=3, target_units=3, draining_units=0, takeable_units=0)
    resize = Resize(ON_DEMAND, 1, to_units, "demand", "k")
    sent = Sent(cloud, planned, [f"node-{i}" for i in range(taken)], capped=True)
    assert held_for_take_back(resize, sent) == held
    assert held_for_take_back(resize, replace(sent, capped=False)) == 0  # a pool in no budget: all bought
    bought = to_units - 1 - taken - held
    assert bought == min(to_units - 1 - taken, max(0, to_units - 1 - takeable))  # what the budget counted as new


def test_a_release_holds_nothing() -> None:
    planned = PoolState(ON_DEMAND, T0, ready_units=3, target_units=3, draining_units=2, takeable_units=2)
    assert held_for_take_back(Resize(ON_DEMAND, 3, 1, "idle", "k"), Sent(planned, planned)) == 0
