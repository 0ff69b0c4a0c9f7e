"""Every Kubernetes API call the daemon makes in a full scenario must be granted by the RBAC rendered from
``deploy/``: two whole daemons (real loop, election, events) start, elect, tick, refit, lose the API, fail
over, come back, and shut down, while the fake API server logs each request in RBAC terms. The scenario runs
twice: rehearsed (replayed trace, simulated pools) and on the live wiring (Prometheus, GKE node pools, node
drains through the Kubernetes API, a drain taken over by the new leader). Each scenario runs once per mode for
the whole module; ``docs/kubernetes-rbac.md`` is the recording written out (``make rbac-doc``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TypeVar

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from actuators import SimulatedCluster
from agent.daemon.live import live_parts
from agent.daemon.wiring import assemble
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from config.daemon import KubernetesApiSettings
from kube import kubernetes_api_client
from models.clock import SimulatedClock
from tests.daemon import rbac_doc
from tests.daemon.conftest import RETRY, T0
from tests.daemon.links import CuttableLink
from tests.daemon.manifests import KUBECTL, allowed, grants_for, render
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, SPOT, NodeMirror, Rig
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi, RequestRecord
from tests.fakes.prometheus_api import FakePrometheusApi

# One worker runs the whole module, so the scenarios (the module's fixture) run once, not once per worker.
pytestmark = pytest.mark.xdist_group("rbac")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: it renders the RBAC to check")
MODES = ("dry-run", "enforce")
# The live scenario's idle nodes are released once unneeded for the stabilization window (the rig's is 10m): a
# shorter one makes the same calls (the same drains, the same wait on the budget, the same takeover) in fewer
# election rounds.
STABILIZATION_MIN = 4
_Fake = TypeVar("_Fake", FakeKubeApi, FakeGkeApi, FakePrometheusApi)


@dataclass
class Recording:
    requests: list[RequestRecord]
    gke_api: FakeGkeApi | None = None
    kube_api: FakeKubeApi | None = None
    waited: str = ""  # the live scenario's node whose drain waited on a disruption budget


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Recording]]:
    """Both scenarios in both modes, each on fresh fake servers that stay up until the module's tests are done."""
    with ExitStack() as stack:

        def started(fake: _Fake) -> _Fake:
            fake.start()
            stack.callback(fake.stop)
            return fake

        def link_to(kube_api: FakeKubeApi) -> Callable[[], CuttableLink]:
            def make() -> CuttableLink:
                link = CuttableLink(kube_api.port)
                stack.callback(link.close)
                return link

            return make

        def api_client_for(url: str) -> k8s.ApiClient:
            api_client = kubernetes_api_client(KubernetesApiSettings(api_url=url))
            stack.callback(api_client.close)
            return api_client

        out: dict[tuple[str, str], Recording] = {}
        for mode in MODES:
            kube_api = started(FakeKubeApi())
            requests = _full_scenario(kube_api, SimulatedClock(T0), link_to(kube_api), api_client_for, mode)
            out[("full", mode)] = Recording(requests)
            gke_api, kube_api = started(FakeGkeApi()), started(FakeKubeApi())
            rig = Rig(
                gke_api,
                kube_api,
                started(FakePrometheusApi()),
                SimulatedClock(T0),
                NodeMirror(gke_api, kube_api),
                tmp_path_factory.mktemp(f"live-{mode}"),
            )
            requests, waited = _live_scenario(rig, link_to(kube_api), api_client_for, mode)
            out[("live", mode)] = Recording(requests, gke_api, kube_api, waited)
        yield out


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


@needs_kubectl
@pytest.mark.parametrize("mode", MODES)
def test_every_call_of_a_full_scenario_is_granted_by_the_rendered_rbac(
    recorded: dict[tuple[str, str], Recording], mode: str
) -> None:
    requests = recorded[("full", mode)].requests
    denied = _denied(requests, mode)
    assert denied == [], f"calls not granted by deploy/overlays/{mode}: {denied}"
    # the scenario exercised what the roles are for (a vacuous pass is a failure)
    kinds = {(r.verb, r.resource) for r in requests}
    assert {("get", "leases"), ("create", "leases"), ("update", "leases"), ("create", "events")} <= kinds
    # the planner memory was read by each new leader and created by the first (updates: the live scenario)
    assert {("get", "configmaps"), ("create", "configmaps")} <= kinds
    assert sum(1 for r in requests if r.verb == "update" and r.resource == "leases") > 100


def _live_scenario(
    rig: Rig,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    mode: str,
) -> tuple[list[RequestRecord], str]:
    """Two daemons on the live wiring (``leadtime run`` without --replay): the spot pool grows, two idle on-demand
    nodes are drained (one waits on a disruption budget), the leader loses the API mid-drain and the other takes
    the drain over and finishes it. Returns the Kubernetes requests and the node that waited."""
    rig.add_pools(on_demand_nodes=3)
    busy, waits, _ = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train", busy, namespace=CLASS, accelerators=8))
    rig.kube.put("pods", objs.pod("web", waits, labels={"app": "web"}, owner_kind="ReplicaSet"))
    rig.kube.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=1), group="policy")
    # 16 chips: the busy on-demand node runs 8 of them (not bought again), the spot pool grows for the other 8
    rig.prometheus.set_demand(CLASS, 16)
    document = rig.config_document(election=True, mode=mode)
    document["planner"]["scale_down_stabilization"] = f"{STABILIZATION_MIN}m"
    settings = settings_from_mapping(document, source="rbac scenario")
    links = [link_to(), link_to()]
    replicas = []
    for name, link in zip(("leadtime-a", "leadtime-b"), links, strict=True):
        kube = api_client_for(link.url)
        # each replica writes its own ledger file (its own pod's volume): one file has one writer
        own = settings.model_copy(
            update={"ledger": settings.ledger.model_copy(update={"path": str(rig.workdir / f"{name}.sqlite")})}
        )
        parts = live_parts(own, "rbac scenario", rig.clock, RecordingNotifier(), kube, CollectorRegistry())
        assembled = assemble(own, mode, parts, {"POD_NAME": name, "POD_NAMESPACE": "leadtime"})
        assembled.endpoints.stop()
        replicas.append(assembled)

    def play(seconds: int) -> None:
        for i in range(int(seconds / RETRY.total_seconds())):
            rig.clock.advance(RETRY)
            for replica in replicas:
                replica.daemon.elect()
            if i % 30 == 0:
                for replica in replicas:
                    replica.daemon.tick()

    for replica in replicas:
        replica.daemon.refit()
    # idle for the stabilization window, then drained (a minute later one node is gone, the other waits on the
    # budget); the leader loses the API four minutes into the drains
    play((STABILIZATION_MIN + 4) * 60)
    leader = next(i for i, r in enumerate(replicas) if r.elector.is_leader(rig.clock.now()))
    links[leader].cut()
    play(60)  # the other replica leads and takes over the waiting drain
    rig.kube.delete("poddisruptionbudgets", "web", "default", group="policy")
    play(120)
    links[leader].restore()
    play(60)
    for replica in replicas:
        replica.daemon.stop_working()
        replica.daemon.release()
    return list(rig.kube.requests), waits


def _denied(requests: list[RequestRecord], mode: str) -> list[RequestRecord]:
    grants = grants_for(render(f"overlays/{mode}"), "leadtime", "leadtime")
    return sorted(
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


@needs_kubectl
def test_the_live_daemons_drains_and_takeover_use_only_what_the_enforce_overlay_grants(
    recorded: dict[tuple[str, str], Recording],
) -> None:
    live = recorded[("live", "enforce")]
    requests, waited, gke_api, kube_api = live.requests, live.waited, live.gke_api, live.kube_api
    assert gke_api is not None and kube_api is not None
    assert _denied(requests, "enforce") == []
    used = {(r.verb, r.resource, r.subresource) for r in requests}
    drainer_calls = {
        ("list", "nodes", ""),
        ("patch", "nodes", ""),
        ("list", "pods", ""),
        ("create", "pods", "eviction"),
    }
    assert drainer_calls <= used
    # decisions as Events: on the nodes (in "default") and the pools (on the state ConfigMap); repeats patched
    events = {(r.verb, r.namespace) for r in requests if r.resource == "events"}
    assert {("create", "default"), ("create", "leadtime"), ("patch", "default")} <= events
    # the planner memory: read by each new leader, created once, updated after the ticks that changed it
    assert {("get", "configmaps", ""), ("create", "configmaps", ""), ("update", "configmaps", "")} <= used
    # the drain the first leader started behind the budget was finished by the second: the node is gone
    deleting = {i.name for i in gke_api.pools[NODE_POOLS[ON_DEMAND]].migs[0].instances if i.action == "DELETING"}
    assert waited in deleting
    assert len(deleting) == 2
    assert all(
        not (n.get("spec") or {}).get("unschedulable")
        for n in kube_api.list("nodes")
        if n["metadata"]["name"] not in deleting
    )
    assert gke_api.pools[NODE_POOLS[SPOT]].migs[0].target_size == 1


@needs_kubectl
def test_the_live_daemons_in_dry_run_write_nothing_to_nodes_or_pods(
    recorded: dict[tuple[str, str], Recording],
) -> None:
    live = recorded[("live", "dry-run")]
    requests, gke_api = live.requests, live.gke_api
    assert gke_api is not None
    assert _denied(requests, "dry-run") == []
    writes = {(r.verb, r.resource) for r in requests if r.verb not in ("get", "list", "watch")}
    assert writes <= {
        ("create", "leases"),
        ("update", "leases"),
        ("create", "events"),
        ("patch", "events"),  # the same recommendation on the next tick: its count
        ("create", "configmaps"),  # the agent's own planner memory (recorded decisions count for anti-flapping)
        ("update", "configmaps"),
    }
    assert {("list", "nodes"), ("list", "pods")} <= {(r.verb, r.resource) for r in requests}
    # the recommended drains are Events on the nodes, which the API server keeps in "default"
    assert ("create", "events", "default") in {(r.verb, r.resource, r.namespace) for r in requests}
    grants = grants_for(render("overlays/dry-run"), "leadtime", "leadtime")
    for verb, resource in (("patch", "nodes"), ("update", "nodes"), ("create", "pods/eviction"), ("delete", "pods")):
        assert not allowed(grants, verb, "", resource, "default", "any")
    assert [(m, p) for m, p in gke_api.requests if m in ("POST", "DELETE") and "listManagedInstances" not in p] == []


def test_the_rbac_doc_is_the_recording_and_every_call_in_it_is_granted_by_the_install_manifest(
    recorded: dict[tuple[str, str], Recording],
) -> None:
    """No kubectl needed: the install manifests are already rendered. ``make rbac-doc`` rewrites the page."""
    calls = {mode: [r for (_, m), rec in recorded.items() if m == mode for r in rec.requests] for mode in MODES}
    for mode in MODES:
        rules = rbac_doc.install_rules(mode)
        assert [c for c in set(calls[mode]) if not any(r.allows(c) for r in rules)] == [], mode
    text = rbac_doc.render(calls)
    if os.environ.get("LEADTIME_WRITE_RBAC_DOC") == "1":
        rbac_doc.DOC.write_text(text)
    assert rbac_doc.DOC.read_text() == text, "docs/kubernetes-rbac.md is stale: run `make rbac-doc`"
