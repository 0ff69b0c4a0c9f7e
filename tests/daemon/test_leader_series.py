"""A replica that stops leading stops exporting its last tick's plan, demand, forecasts, pool units and budgets:
two whole daemons (the real agent loop) elect on the fake Kubernetes API over links a test can cut, share one
simulated cluster, and the leader is cut off until the other takes over. Only the new leader's series remain."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from kubernetes import client as k8s

from actuators import SimulatedCluster
from config.schema import BudgetSettings
from models.clock import SimulatedClock
from tests.daemon.conftest import RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica
from tests.fakes.kube_api import FakeKubeApi

# The series of the latest leader tick; each one a leader exports with the helios-earth example and a budget.
TICK_SERIES = (
    "leadtime_forecast_accelerators",
    "leadtime_demand_observed_accelerators",
    "leadtime_pool_recommended_units",
    "leadtime_pool_decision_units",
    "leadtime_pool_target_units",
    "leadtime_pool_ready_units",
    "leadtime_budget_spent_usd",
    "leadtime_budget_remaining_usd",
    "leadtime_budget_projected_usd",
)


def _series(replica: ScenarioReplica) -> set[str]:
    """The names of the tick series ``replica`` exports now."""
    return {
        sample.name
        for family in replica.assembled.metrics.registry.collect()
        for sample in family.samples
        if sample.name in TICK_SERIES
    }


def _play(clock: SimulatedClock, replicas: list[ScenarioReplica], duration: timedelta) -> None:
    """An election every retry period and a tick every minute, as the runtime schedules them."""
    for _ in range(int(duration / RETRY)):
        clock.advance(RETRY)
        for replica in replicas:
            replica.assembled.daemon.elect()
            if clock.now().second == 0:
                replica.assembled.daemon.tick()


def test_a_replica_that_loses_the_lease_exports_no_series_of_its_last_plan(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
) -> None:
    budget = BudgetSettings(name="research", pools=("a100-on-demand",), monthly_cap_usd=250_000.0)
    settings = helios_settings(kube_api.url).model_copy(update={"budgets": (budget,)})
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    links = {name: link_to() for name in ("leadtime-a", "leadtime-b")}
    a, b = (
        scenario_replica(name, settings, clock, cluster, "enforce", api_client_for(link.url))
        for name, link in links.items()
    )
    _play(clock, [a, b], timedelta(minutes=5))
    first, second = (a, b) if a.assembled.elector.is_leader(clock.now()) else (b, a)
    assert _series(first) == set(TICK_SERIES)  # it planned: every series is there
    assert _series(second) == set()

    links[first.name].cut()  # it cannot renew: it stops leading at its renew deadline, the other takes over
    _play(clock, [a, b], timedelta(minutes=3))
    assert second.assembled.elector.is_leader(clock.now())
    registry = first.assembled.metrics.registry
    assert registry.get_sample_value("leadtime_is_leader") == 0
    assert _series(first) == set(), "the former leader still exports its last plan as if current"
    assert _series(second) == set(TICK_SERIES)
