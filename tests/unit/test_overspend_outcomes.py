"""A projected overspend tells each release of its budget by what the tick did with it, not by the plan: in dry-run
(shadow mode) nothing is cut and the alert says the releases are only recommended; in enforce, a release the
executor rejected is told as rejected, with why, beside the ones carried out."""

from __future__ import annotations

from datetime import timedelta

from actuators.base import Actuator
from actuators.dry_run import DryRunActuator, DryRunDrainer
from actuators.simulated import SimulatedCluster
from agent.drains import NodeDrains
from agent.executor import execute
from agent.planning import PlannerMemory
from models import AlertEvent, AlertKind
from models.clock import SimulatedClock
from tests.unit.test_budget_unread_pool import NOW, _plan, _settings, _watch

HARD_STOP = {"monthly_cap_usd": 7.0, "commit_horizon": "2h"}  # 3.33 USD spent: both pools' units must go


def _overspend_after_a_tick(
    cluster: SimulatedCluster, actuator: Actuator, drains: NodeDrains | None = None, meddle: bool = False
) -> AlertEvent:
    """One tick of the budget's hard stop on ``cluster`` through ``actuator``: plan, execute, alert. With
    ``meddle``, someone else resizes a100 between the plan and its execution."""
    settings = _settings(HARD_STOP)
    watch = _watch(settings)
    states = {s.pool_id: s for s in actuator.list_pools()}
    if drains is not None:
        states, _ = drains.observe(states, NOW)
    spends = watch.observe(NOW, states)
    plan = _plan(settings, states, spends, NOW)
    assert {(r.pool_id, r.from_units, r.to_units, r.forced) for r in plan.resizes} == {
        ("a100", 4, 0, True),
        ("h100", 1, 0, True),
    }
    if meddle:
        cluster.resize("a100", 3, "someone else")
    specs = {p.pool_id: p for p in settings.pool_specs()}
    execution = execute(plan, actuator, specs, PlannerMemory(), NOW, drains)
    [overspend] = [
        e for e in watch.alerts(NOW, plan, spends, states, execution.results) if e.kind is AlertKind.PROJECTED_OVERSPEND
    ]
    return overspend


def _cluster() -> tuple[SimulatedCluster, SimulatedClock]:
    clock = SimulatedClock(NOW)
    return SimulatedCluster(_settings(HARD_STOP).pool_specs(), clock, initial_units={"a100": 4, "h100": 1}), clock


def test_in_dry_run_the_hard_stop_is_told_as_recommended_and_nothing_as_released() -> None:
    cluster, clock = _cluster()
    event = _overspend_after_a_tick(cluster, DryRunActuator(cluster, clock))
    assert {s.pool_id: s.target_units for s in cluster.list_pools()} == {"a100": 4, "h100": 1}  # nothing was cut
    assert event.summary.endswith(
        "No scale-up is recommended; the hard stop's release of burst units, busy ones too, is recommended "
        "(dry-run), not carried out."
    )
    assert "is releasing" not in event.summary and "Scale-ups are stopped" not in event.summary
    assert event.details["shedding"].splitlines() == [
        "a100: 4 -> 0 units (hard stop: busy units too): recommended (dry-run), not carried out",
        "h100: 1 -> 0 units (hard stop: busy units too): recommended (dry-run), not carried out",
    ]


def test_in_dry_run_a_release_by_drains_names_the_nodes_it_would_drain() -> None:
    cluster, clock = _cluster()
    drains = NodeDrains({"a100": DryRunDrainer(cluster, clock)}, timedelta(minutes=10))
    event = _overspend_after_a_tick(cluster, DryRunActuator(cluster, clock), drains)
    assert event.details["shedding"].splitlines()[0] == (
        "a100: 4 -> 0 units (hard stop: busy units too): a100-busy-0, a100-busy-1, a100-busy-2, a100-busy-3: "
        "recommended (dry-run), not carried out"
    )


def test_in_enforce_the_releases_carried_out_are_told_as_done() -> None:
    cluster, _ = _cluster()
    event = _overspend_after_a_tick(cluster, cluster)
    assert {s.pool_id: s.target_units for s in cluster.list_pools()} == {"a100": 0, "h100": 0}
    assert event.summary.endswith("Scale-ups are stopped; the hard stop is releasing burst units, busy ones too.")
    assert event.details["shedding"].splitlines() == [
        "a100: 4 -> 0 units (hard stop: busy units too): done",
        "h100: 1 -> 0 units (hard stop: busy units too): done",
    ]


def test_in_enforce_a_rejected_release_is_told_as_rejected_with_why() -> None:
    cluster, _ = _cluster()
    event = _overspend_after_a_tick(cluster, cluster, meddle=True)
    assert {s.pool_id: s.target_units for s in cluster.list_pools()} == {"a100": 3, "h100": 0}
    assert event.summary.endswith(
        "Scale-ups are stopped; the hard stop is releasing burst units, busy ones too; 1 of 2 planned releases not "
        "carried out (see shedding)."
    )
    assert event.details["shedding"].splitlines() == [
        "a100: 4 -> 0 units (hard stop: busy units too): rejected: planned from 4 units but the pool is now 3 units; "
        "re-planning next tick",
        "h100: 1 -> 0 units (hard stop: busy units too): done",
    ]
