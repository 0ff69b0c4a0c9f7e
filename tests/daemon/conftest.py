"""Fixtures for the daemon tests: replicas' electors wired to the fake Kubernetes API through cuttable links."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

import pytest
from kubernetes import client as k8s

from agent.daemon.lease import LeaseElector
from config.daemon import KubernetesApiSettings
from kube import Leases, kubernetes_api_client
from models.clock import SimulatedClock
from tests.daemon.elector_hooks import ElectorHooks
from tests.daemon.links import CuttableLink
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

if TYPE_CHECKING:
    from tests.daemon.drain_replicas import DrainReplica

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=15)
DEADLINE = timedelta(seconds=10)
RETRY = timedelta(seconds=2)
NAMESPACE = "leadtime"
LEASE_NAME = "leadtime"


@pytest.fixture
def clock() -> SimulatedClock:
    return SimulatedClock(T0)


@pytest.fixture
def link_to(kube_api: FakeKubeApi) -> Iterator[Callable[[], CuttableLink]]:
    links: list[CuttableLink] = []

    def make() -> CuttableLink:
        link = CuttableLink(kube_api.port)
        links.append(link)
        return link

    yield make
    for link in links:
        link.close()


@pytest.fixture
def api_client_for() -> Iterator[Callable[[str], k8s.ApiClient]]:
    clients: list[k8s.ApiClient] = []

    def make(url: str) -> k8s.ApiClient:
        api_client = kubernetes_api_client(KubernetesApiSettings(api_url=url))
        clients.append(api_client)
        return api_client

    yield make
    for api_client in clients:
        api_client.close()


class MakeElector(Protocol):
    """``elector_for``: a replica's elector and its link; ``hooks``, what the test does to its elector."""

    def __call__(self, identity: str, hooks: ElectorHooks | None = None) -> tuple[LeaseElector, CuttableLink]: ...


@pytest.fixture
def elector_for(
    clock: SimulatedClock, link_to: Callable[[], CuttableLink], api_client_for: Callable[[str], k8s.ApiClient]
) -> MakeElector:
    """A replica's elector, talking to the fake API through its own link; short request timeout for speed. Its
    monotonic clock is the simulated clock's; a test plays a wall-clock step by passing its own ``now``."""

    def make(identity: str, hooks: ElectorHooks | None = None) -> tuple[LeaseElector, CuttableLink]:
        link = link_to()
        timeout = timedelta(seconds=0.3)
        api_client = api_client_for(link.url)
        elector = LeaseElector(
            Leases(api_client, timeout) if hooks is None else hooks.leases(api_client, timeout),
            name=LEASE_NAME,
            namespace=NAMESPACE,
            identity=identity,
            lease_duration=LEASE,
            renew_deadline=DEADLINE,
            monotonic=clock.monotonic if hooks is None else hooks.monotonic,
        )
        return elector, link

    return make


@pytest.fixture
def drain_replicas(
    clock: SimulatedClock,
    elector_for: MakeElector,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    gke_api: FakeGkeApi,
) -> tuple[DrainReplica, DrainReplica, str]:
    """Two whole daemons draining one GKE pool (``tests.daemon.drain_replicas.drain_pair``), A leading, and the node
    their drains take."""
    from tests.daemon.drain_replicas import drain_pair  # the rig imports this module

    return drain_pair(clock, elector_for, kube_api, kube_client, gke_api)
