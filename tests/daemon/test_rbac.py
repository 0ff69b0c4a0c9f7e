"""Every Kubernetes API call the daemon makes in a full scenario must be granted by the RBAC rendered from
``deploy/``: two whole daemons (real loop, election, events) start, elect, tick, refit, lose the API, fail
over, come back, and shut down, while the fake API server logs each request in RBAC terms."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client as k8s

from actuators import SimulatedCluster
from models.clock import SimulatedClock
from tests.daemon.conftest import RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.manifests import KUBECTL, allowed, grants_for, render
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica
from tests.fakes.kube_api import FakeKubeApi, RequestRecord

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: it renders the RBAC to check")


def _full_scenario(
    kube_api: FakeKubeApi,
    clock: SimulatedClock,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    mode: str,
) -> list[RequestRecord]:
    settings = helios_settings(kube_api.url)
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    links = [link_to(), link_to()]
    replicas: list[ScenarioReplica] = [
        scenario_replica(name, settings, clock, cluster, mode, api_client_for(link.url))
        for name, link in zip(("leadtime-a", "leadtime-b"), links, strict=True)
    ]

    def play(seconds: int, alive: list[ScenarioReplica]) -> None:
        for i in range(int(seconds / RETRY.total_seconds())):
            clock.advance(RETRY)
            for replica in alive:
                replica.assembled.daemon.elect()
            if i % 30 == 0:
                for replica in alive:
                    replica.assembled.daemon.tick()

    for replica in replicas:
        replica.assembled.daemon.refit()
    play(120, replicas)
    links[0].cut()  # the leader loses the API: it stops, the other takes over
    play(60, replicas)
    links[0].restore()
    play(60, replicas)
    for replica in replicas:
        replica.assembled.daemon.daily_report()
        replica.assembled.daemon.stop_working()
        replica.assembled.daemon.release()
    return list(kube_api.requests)


@pytest.mark.parametrize("mode", ["dry-run", "enforce"])
def test_every_call_of_a_full_scenario_is_granted_by_the_rendered_rbac(
    kube_api: FakeKubeApi,
    clock: SimulatedClock,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    mode: str,
) -> None:
    requests = _full_scenario(kube_api, clock, link_to, api_client_for, mode)
    grants = grants_for(render(f"overlays/{mode}"), "leadtime", "leadtime")
    denied = sorted(
        {
            r
            for r in requests
            if not allowed(
                grants,
                r.verb,
                r.api_group,
                f"{r.resource}/{r.subresource}" if r.subresource else r.resource,
                r.namespace,
                r.name,
            )
        },
        key=str,
    )
    assert denied == [], f"calls not granted by deploy/overlays/{mode}: {denied}"
    # the scenario exercised what the roles are for (a vacuous pass is a failure)
    kinds = {(r.verb, r.resource) for r in requests}
    assert {("get", "leases"), ("create", "leases"), ("update", "leases"), ("create", "events")} <= kinds
    assert sum(1 for r in requests if r.verb == "update" and r.resource == "leases") > 100
