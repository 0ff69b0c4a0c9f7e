"""A scale-up that takes back idle nodes being drained, on a budget other agents share (``remote_pools``), reserves
only the units it adds to the bill. The nodes being drained are billed until their drains delete them, and the
pool's standing reservation already counts them (``BudgetReserver.commit`` reserves its billed units), so asking
the shared budget for them again counted them twice: with one busy node and two idle ones draining under a cap
with room for 3.5 nodes, demand for three nodes was held ("granted 0 of 2 more units (1->1 instead of ->3)") on the
shared budget, where the same budget unshared lets the plan take both nodes back. On the fake GKE and Kubernetes
APIs with the real drainer and the real loop; the reserver's arithmetic on a pool state alone below."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from agent.budget_reserve import BudgetReserver
from agent.ledger import InMemoryLedger
from agent.ledger.postgres import PostgresLedger
from agent.ledger.sqlite import SqliteLedger
from agent.notify import RecordingNotifier
from agent.planning.budget import Budget
from config import settings_from_mapping
from models import CapacityPlan, PoolState, Resize, SkipReason
from tests.e2e.rig import CLASS, ON_DEMAND, T0, Rig, live_agent
from tests.fakes import kube_objects as objs
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_drains_takeover_forced_marks import WEB, WINDOW, _release
from tests.test_takeback_budget_drains import MINUTE, NODE_HOUR, _cloud_target, rig
from tests.unit.test_budget_enforcement import spec

__all__ = ["rig"]  # the fixture, shared with the take-back tests of an unshared budget


@POSTGRES
@pytest.mark.parametrize("shared", [False, True], ids=["own-budget", "shared-budget"])
def test_a_take_back_of_draining_nodes_is_granted_on_a_shared_budget(
    rig: Rig, kube_client: k8s.ApiClient, shared: bool, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
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
    budget: dict[str, object] = {"name": "od", "pools": [ON_DEMAND], "monthly_cap_usd": NODE_HOUR * hours * 3.5}
    if shared:  # another agent spends from it too (nothing recorded yet), through the PostgreSQL ledger they share
        budget["remote_pools"] = ["other-team-a100"]
        database: Database = request.getfixturevalue("postgres_database")
        (tmp_path / "ledger-password").write_text(database.password)
        password_file = str(tmp_path / "ledger-password")
        document["ledger"] = {"backend": "postgresql", "url": database.url, "password_file": password_file}
    document["budgets"] = [budget]
    agent = live_agent(rig, settings_from_mapping(document, source="e2e config"), kube_client, RecordingNotifier())
    ledger = agent.parts.ledger
    assert isinstance(ledger, PostgresLedger | SqliteLedger)
    request.addfinalizer(ledger.close)
    agent.run_once(rig.clock.now())  # the idle nodes are seen idle from now
    rig.clock.advance(WINDOW)
    _release(agent, rig, 3, forced=False)
    _release(agent, rig, 2, forced=False)
    rig.clock.advance(MINUTE)
    agent.run_once(rig.clock.now())  # both drains under way: the standing reservation counts their nodes
    rig.clock.advance(MINUTE)
    rig.prometheus.set_demand(CLASS, 24)

    tick = agent.run_once(rig.clock.now())

    assert [(r.from_units, r.to_units) for r in tick.plan.resizes] == [(1, 3)]
    assert [s.detail for s in tick.plan.skips if s.reason is SkipReason.BUDGET] == []
    assert agent.drains is not None and agent.drains.pending == () and _cloud_target(rig) == 3


NOW = T0
TEAM = Budget("team", frozenset({"gpu", "gpu-east"}), monthly_cap_usd=1e9, remote_pools=frozenset({"gpu-east"}))


def _draining_state(serving: int, draining: int) -> PoolState:
    """``serving`` nodes in the target, and ``draining`` idle nodes being drained (out of the target, still billed)
    that a scale-up takes back first."""
    return PoolState("gpu", NOW, serving, serving, draining_units=draining, takeable_units=draining)


@pytest.mark.parametrize(
    ("to_units", "new_units"),
    [(2, 0), (3, 0), (5, 2)],  # within the nodes being drained: nothing new; beyond them, only the units beyond
)
def test_a_take_back_reserves_only_the_units_beyond_the_nodes_being_drained(to_units: int, new_units: int) -> None:
    ledger = InMemoryLedger()
    reserver = BudgetReserver(ledger, [TEAM], {"gpu": spec("gpu", 10.0)}, "cluster-west", timedelta(hours=1))
    state = _draining_state(serving=1, draining=2)
    up = Resize("gpu", 1, to_units, "forecast", f"gpu@{NOW.isoformat()}->{to_units}")
    per_unit = 10.0 * Budget("x", frozenset(), 1.0).period(NOW).remaining(NOW).total_seconds() / 3600.0

    reserved = reserver.reserve(NOW, CapacityPlan(NOW, resizes=(up,), targets={"gpu": to_units}), {"gpu": state})

    assert reserved.plan.resizes == (up,) and reserved.alerts == ()
    assert ledger.reserved("team", NOW) == pytest.approx(new_units * per_unit)


def test_a_take_back_beyond_the_shared_headroom_keeps_the_nodes_being_drained_and_trims_only_the_new_units() -> None:
    """Room for one new unit: 1 -> 5 over two nodes being drained becomes 1 -> 4 (both taken back, one bought)."""
    per_unit = 10.0 * Budget("x", frozenset(), 1.0).period(NOW).remaining(NOW).total_seconds() / 3600.0
    tight = Budget("team", TEAM.pools, monthly_cap_usd=1.5 * per_unit, remote_pools=TEAM.remote_pools)
    ledger = InMemoryLedger()
    reserver = BudgetReserver(ledger, [tight], {"gpu": spec("gpu", 10.0)}, "cluster-west", timedelta(hours=1))
    up = Resize("gpu", 1, 5, "forecast", f"gpu@{NOW.isoformat()}->5")

    plan = CapacityPlan(NOW, resizes=(up,), targets={"gpu": 5})
    reserved = reserver.reserve(NOW, plan, {"gpu": _draining_state(serving=1, draining=2)})

    [trimmed] = reserved.plan.resizes
    assert (trimmed.from_units, trimmed.to_units, trimmed.key) == (1, 4, f"gpu@{NOW.isoformat()}->4")
    [skip] = reserved.plan.skips
    assert "granted 1 of 2 more units (1->4 instead of ->5, 2 of them taken back from their drains" in skip.detail
    assert ledger.reserved("team", NOW) == pytest.approx(per_unit)
