"""A leader that can read no demand, or no pool, is not ready: its ticks run, hold every pool and survive each
class's or pool's error, but they plan on nothing, so they are counted as ``blind`` and are no success. A wrong
prometheus.url from the start, or a cloud permission refused for every pool (read through the router a live daemon
reads its pools through, which leaves such pools out and reports them unread instead of failing), leaves the
leader unready; a blind spell shorter than the readiness bound does not."""

from __future__ import annotations

from datetime import timedelta

from actuators import SimulatedCluster
from models.clock import SimulatedClock
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica

TICK = timedelta(seconds=60)
BOUND = 3 * TICK  # the readiness bound: daemon.endpoints.ready_max_tick_age, 3 ticks by default


def _replica(clock: SimulatedClock) -> tuple[ScenarioReplica, SimulatedCluster]:
    settings = helios_settings(kube_url=None)  # a single replica: election off
    assert settings.daemon.ready_bound(settings.loop.tick_interval) == BOUND
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    return scenario_replica("leadtime-a", settings, clock, cluster, "enforce", kube=None, routed=True), cluster


def _ticks(replica: ScenarioReplica, clock: SimulatedClock, count: int) -> None:
    for _ in range(count):
        clock.advance(TICK)
        replica.assembled.daemon.tick()


def _ticks_by_outcome(replica: ScenarioReplica) -> dict[str, float]:
    registry = replica.assembled.metrics.registry
    outcomes = ("ok", "failed", "blind")
    values = {o: registry.get_sample_value("leadtime_ticks_total", {"role": "leader", "outcome": o}) for o in outcomes}
    return {o: v for o, v in values.items() if v}


def test_a_leader_that_never_reads_demand_is_never_ready(clock: SimulatedClock) -> None:
    r, cluster = _replica(clock)
    r.deps.metrics_down = True  # a wrong prometheus.url: nothing answers from the start
    _ticks(r, clock, 10)
    readiness = r.assembled.health.readiness(clock.now())
    assert not readiness.ready
    assert "no demand class has data" in readiness.detail
    assert "Prometheus is unreachable" in readiness.detail
    assert r.assembled.health.liveness(clock.now()).ready  # unready, not restarted: a restart would not help
    assert _ticks_by_outcome(r) == {"blind": 10}
    assert r.assembled.metrics.registry.get_sample_value("leadtime_last_successful_tick_timestamp_seconds") == 0
    assert cluster.paid_units() == {"a100-on-demand": 0}  # every pool held

    r.deps.metrics_down = False
    _ticks(r, clock, 1)
    assert r.assembled.health.readiness(clock.now()).ready
    assert _ticks_by_outcome(r) == {"blind": 10, "ok": 1}


def test_a_leader_that_can_read_no_pool_is_not_ready(clock: SimulatedClock) -> None:
    r, cluster = _replica(clock)
    r.deps.cloud_down = True  # every read of the cloud fails: the router leaves each pool out, unread
    _ticks(r, clock, 10)
    readiness = r.assembled.health.readiness(clock.now())
    assert not readiness.ready
    assert "no pool could be read (1 held; a100-on-demand:" in readiness.detail
    assert _ticks_by_outcome(r) == {"blind": 10}
    assert cluster.scale_actions == 0


def test_a_blind_spell_shorter_than_the_readiness_bound_keeps_the_leader_ready(clock: SimulatedClock) -> None:
    r, _ = _replica(clock)
    _ticks(r, clock, 3)
    r.deps.metrics_down = True
    _ticks(r, clock, 3)  # the last success is 3 minutes old: within the bound
    assert r.assembled.health.readiness(clock.now()).ready
    _ticks(r, clock, 1)
    readiness = r.assembled.health.readiness(clock.now())
    assert not readiness.ready
    assert "last successful tick 240s ago (bound 180s); last failure: nothing to plan on" in readiness.detail
    assert _ticks_by_outcome(r) == {"ok": 3, "blind": 4}
