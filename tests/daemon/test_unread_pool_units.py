"""``leadtime_pool_target_units`` and ``leadtime_pool_ready_units`` of a pool that cannot be read, with a whole
daemon (real agent loop and planner, pools read through a ``RoutingActuator`` as in a live daemon, a simulated
cluster and clock): its series are removed while it is unread, instead of its last values exported on while the
pool is resized by someone else, and are set again from the first read after."""

from __future__ import annotations

from datetime import timedelta

from actuators import SimulatedCluster
from config import load_settings
from models import PermanentActuatorError
from models.clock import SimulatedClock
from tests.daemon import scenario
from tests.daemon.conftest import T0
from tests.daemon.scenario import scenario_replica

POOL = "a100-spot"
TICK = timedelta(seconds=60)


def test_an_unread_pool_has_no_unit_series_until_it_is_read_again() -> None:
    base = load_settings(scenario.ROOT / "config/examples/helios-hybrid.yaml")
    reference = scenario.helios_settings(None)
    settings = base.model_copy(
        update={"daemon": reference.daemon, "loop": reference.loop, "forecast": reference.forecast}
    )
    clock = SimulatedClock(T0 + timedelta(days=1))
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    replica = scenario_replica(
        "leadtime-a", settings, clock, cluster, "enforce", kube=None, routed=True, trace_start=T0
    )
    daemon, registry = replica.assembled.daemon, replica.assembled.metrics.registry
    assert POOL in {p.pool_id for p in settings.pool_specs()} and len(settings.pool_specs()) > 1

    def units() -> tuple[float | None, float | None]:
        return (
            registry.get_sample_value("leadtime_pool_target_units", {"pool": POOL}),
            registry.get_sample_value("leadtime_pool_ready_units", {"pool": POOL}),
        )

    def real() -> tuple[float, float]:
        state = {s.pool_id: s for s in cluster.list_pools()}[POOL]
        return float(state.target_units), float(state.ready_units)

    daemon.refit()
    for _ in range(30):
        clock.advance(TICK)
        daemon.tick()
    before = units()
    assert before == real()
    assert before[0] is not None and before[0] > 0  # the planner keeps some units on the pool

    cluster.resize(POOL, 0, "scaled-to-zero-by-someone-else")
    cluster.fail_reads(POOL, PermanentActuatorError(POOL, "403 Forbidden: permission container.nodePools.get denied"))
    for _ in range(30):
        clock.advance(TICK)
        daemon.tick()
        assert units() == (None, None)
    assert POOL in cluster.unread_pools()
    others = [p.pool_id for p in settings.pool_specs() if p.pool_id != POOL]
    assert all(registry.get_sample_value("leadtime_pool_target_units", {"pool": p}) is not None for p in others)

    cluster.fail_reads(POOL, None)
    clock.advance(TICK)
    daemon.tick()
    assert units() == (0.0, 0.0)  # read again: the size someone else gave it while it was unread
