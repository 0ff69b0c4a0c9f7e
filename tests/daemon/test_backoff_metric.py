"""``leadtime_pool_backoff_until_seconds{pool}`` with whole daemons (real agent loop and planner, election on the
fake Kubernetes API, a simulated cluster out of capacity, a simulated clock): the leader exports, for the pool a
stockout backed off, the time its back-off ends, as long as it lasts and not after; the standby exports none."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from actuators import SimulatedCluster
from models.clock import SimulatedClock
from tests.daemon.conftest import RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica
from tests.fakes.kube_api import FakeKubeApi

POOL = "a100-on-demand"  # on demand: while it is backed off, the planner records no `backoff` skip for it
NAME = "leadtime_pool_backoff_until_seconds"


def _exported(replica: ScenarioReplica) -> dict[str, float]:
    """The series of the back-off gauge on this replica's /metrics page, by pool."""
    text = replica.assembled.metrics.exposition().decode()
    families = [f for f in text_string_to_metric_families(text) if f.name == NAME]
    assert families, f"{NAME} is not exposed"
    return {sample.labels["pool"]: sample.value for sample in families[0].samples}


def test_the_leader_exports_a_stocked_out_pool_until_its_back_off_ends(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
) -> None:
    settings = helios_settings(kube_api.url)
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    cluster.add_stockout(POOL, clock.now(), clock.now() + timedelta(minutes=5))
    replicas = [
        scenario_replica(name, settings, clock, cluster, "enforce", api_client_for(link_to().url))
        for name in ("leadtime-a", "leadtime-b")
    ]
    for replica in replicas:
        replica.assembled.daemon.refit()
        assert _exported(replica) == {}

    def play(duration: timedelta) -> None:
        """Election every retry period, a tick every minute (and at once for a new leader)."""
        for _ in range(int(duration / RETRY)):
            clock.advance(RETRY)
            for replica in replicas:
                step = replica.assembled.daemon.elect()
                if clock.now().second == 0 or step.became_leader:
                    replica.assembled.daemon.tick()

    play(timedelta(minutes=1))
    (leader,) = [r for r in replicas if r.assembled.elector.is_leader(clock.now())]
    (standby,) = [r for r in replicas if r is not leader]
    until = leader.assembled.loop.agent.memory.backoff_until[POOL]
    assert clock.now() < until
    assert _exported(leader) == {POOL: until.timestamp()}
    assert _exported(standby) == {}

    play(timedelta(minutes=3))  # still backed off, ticking all along
    assert clock.now() < until
    assert _exported(leader) == {POOL: until.timestamp()}

    play(until - clock.now() + timedelta(minutes=2))  # the back-off ended; the stockout is over, so no new one
    assert leader.assembled.elector.is_leader(clock.now())
    assert _exported(leader) == {}
    assert _exported(standby) == {}
