"""Every decision of a live daemon is a Kubernetes Event a person can read: listed through the real
``kubernetes`` client, and with ``kubectl get events`` (when kubectl is installed), against the fake API.

One scenario on ``leadtime run``'s live wiring (Lease election, the state ConfigMap, GKE node pools, drains
through the Kubernetes API): a budget cap trims the spot pool's scale-up, two idle on-demand nodes are drained
(one waits on a PodDisruptionBudget for several ticks), then the demand metric disappears and the pools are held.
"""

from __future__ import annotations

import re
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from agent.daemon.live import live_parts
from agent.daemon.wiring import assemble
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from tests.daemon.manifests import KUBECTL
from tests.e2e.rig import CLASS, ON_DEMAND, SPOT, Rig
from tests.fakes import kube_objects as objs

MINUTE = timedelta(minutes=1)
ENVIRON = {"POD_NAME": "leadtime-0", "POD_NAMESPACE": "leadtime"}
STATE = "leadtime-state"  # the agent's state ConfigMap: pool decisions are attached to it
# Each resize says why, from its decision record: of 48 chips of demand the on-demand pool's 3 units hold 24 (one
# busy, two idle for less than the window), and the other 24 are 3 spot units of 8 chips, of which the hourly cap
# allows 1; once its two units have been idle for the window, the on-demand pool keeps the 8 chips of 16 that its
# busy unit runs and releases them.
TRIMMED_UP = (
    "need 24 chips within lead time 10m (training: q0.9 peak 48, now 48, 24 of 48 here) -> 3 units of 8 chips = 3 "
    "-> budget 'spot-hourly' (hourly cap) -2: 1 -> target 1"
)
RELEASE = (
    "need 8 chips within lead time 10m (training: q0.9 peak 16, now 16, 8 of 16 here) -> 1 units of 8 chips = 1 "
    "-> target 1"
)


def _scenario(rig: Rig, kube: k8s.ApiClient, mode: str) -> tuple[str, str]:
    """Runs the scenario; returns (the node whose drain waited on the budget, the idle node drained at once)."""
    rig.add_pools(on_demand_nodes=3)
    busy, waits, idle = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train", busy, namespace=CLASS, accelerators=8))
    web = objs.pod("web", waits, labels={"app": "web"}, owner_kind="ReplicaSet")
    web["spec"]["terminationGracePeriodSeconds"] = 0  # stops at once: evicted, it is gone on the same tick
    rig.kube.put("pods", web)
    rig.kube.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=1), group="policy")
    rig.prometheus.set_demand(CLASS, 48)
    document = rig.config_document(election=True, mode=mode)
    document["budgets"] = [{"name": "spot-hourly", "pools": [SPOT], "hourly_cap_usd": 20}]
    settings = settings_from_mapping(document, source="e2e config")
    parts = live_parts(settings, "e2e config", rig.clock, RecordingNotifier(), kube, CollectorRegistry())
    assembled = assemble(settings, mode, parts, ENVIRON)
    assembled.endpoints.stop()

    def tick(after: timedelta) -> None:
        rig.clock.advance(after)
        assembled.daemon.elect()
        assembled.daemon.tick()

    assembled.daemon.refit()
    tick(MINUTE)
    rig.settle()
    rig.prometheus.set_demand(CLASS, 16)
    for _ in range(4):  # idle for the stabilization window, then drained; one drain waits on the budget
        tick(5 * MINUTE)
    rig.kube.delete("poddisruptionbudgets", "web", "default", group="policy")
    tick(MINUTE)  # the waiting drain finishes
    rig.settle()
    del rig.prometheus.demand[CLASS]  # the demand metric is gone: the pools are held
    tick(MINUTE)
    tick(MINUTE)
    assembled.daemon.stop_working()
    return waits, idle


def _events(kube: k8s.ApiClient) -> list[k8s.CoreV1Event]:
    return list(k8s.CoreV1Api(kube).list_event_for_all_namespaces().items)


def test_each_decision_of_the_live_daemon_is_one_readable_event(rig: Rig, kube_client: k8s.ApiClient) -> None:
    waits, idle = _scenario(rig, kube_client, "enforce")
    core = k8s.CoreV1Api(kube_client)
    state_uid = core.read_namespaced_config_map(STATE, "leadtime").metadata.uid
    events = [e for e in core.list_event_for_all_namespaces().items if e.reason not in ("LeaderElected",)]
    seen = {(e.involved_object.kind, e.involved_object.name, e.reason, e.message) for e in events}
    assert len(seen) == len(events), "a repeated decision must be one Event with a count, not several"

    by_reason: dict[str, list[Any]] = {}
    for e in events:
        by_reason.setdefault(e.reason, []).append(e)
    # pool decisions: on the state ConfigMap (with its uid, which kubectl describe searches by), naming the pool
    assert [e.message for e in by_reason["ScaleUp"]] == [f"pool {SPOT}: scale up from 0 to 1 units: {TRIMMED_UP}"]
    (trim,) = by_reason["BudgetTrimmed"]
    assert trim.message.startswith(f"pool {SPOT}: budget 'spot-hourly' (hourly cap 20.00 USD) allows 1 of 3 more")
    assert [e.message for e in by_reason["ScaleDown"]] == [
        f"pool {ON_DEMAND}: scale down from 3 to 1 units by draining {waits}, {idle}: {RELEASE}"
    ]
    held = sorted(e.message for e in by_reason["HeldMissingData"])
    assert held == [f"pool {p}: held: no trustworthy demand for {CLASS}; holding" for p in sorted((ON_DEMAND, SPOT))]
    assert all(e.count == 2 for e in by_reason["HeldMissingData"])  # held on two ticks: one Event, count 2
    for reason in ("ScaleUp", "BudgetTrimmed", "ScaleDown", "HeldMissingData"):
        for e in by_reason[reason]:
            assert (e.metadata.namespace, e.involved_object.kind, e.involved_object.uid) == (
                "leadtime",
                "ConfigMap",
                state_uid,
            )
    # node decisions: on each Node, in the "default" namespace, the node name as uid (as the kubelet does)
    for reason in ("Cordoned", "DrainStarted", "DrainFinished"):
        assert sorted(e.involved_object.name for e in by_reason[reason]) == sorted((waits, idle))
    (blocked,) = by_reason["DrainBlocked"]
    assert blocked.involved_object.name == waits
    assert blocked.message == (
        f"pool {ON_DEMAND}: waiting for disruption budgets to allow evicting [('default', 'web')] from {waits}: "
        "The disruption budget web needs 1 healthy pods and has 1 currently (PodDisruptionBudget)"
    )
    assert blocked.count == 3  # blocked on three ticks: patched, not created again
    assert blocked.last_timestamp > blocked.first_timestamp
    for reason in ("Cordoned", "DrainStarted", "DrainBlocked", "DrainFinished"):
        for e in by_reason[reason]:
            assert (e.metadata.namespace, e.involved_object.kind) == ("default", "Node")
            assert e.involved_object.uid == e.involved_object.name
            assert e.source.component == "leadtime" and e.reporting_component == "leadtime"
    assert {e.type for e in by_reason["DrainBlocked"] + by_reason["HeldMissingData"]} == {"Warning"}
    assert set(by_reason) == {
        "ScaleUp",
        "BudgetTrimmed",
        "ScaleDown",
        "HeldMissingData",
        "Cordoned",
        "DrainStarted",
        "DrainBlocked",
        "DrainWaiting",
        "DrainFinished",
    }
    # what kubectl describe asks for: the Events of this object, by name, kind and uid
    described = core.list_namespaced_event(
        "leadtime",
        field_selector=f"involvedObject.name={STATE},involvedObject.kind=ConfigMap,involvedObject.uid={state_uid}",
    ).items
    assert {e.reason for e in described} == {"ScaleUp", "BudgetTrimmed", "ScaleDown", "HeldMissingData"}


COLUMNS = (
    "NAMESPACE:.metadata.namespace,KIND:.involvedObject.kind,OBJECT:.involvedObject.name,REASON:.reason,"
    "COUNT:.count,MESSAGE:.message"
)


def _kubectl(tmp_path: Path, server: str, *args: str) -> str:
    """``kubectl`` against ``server`` through a kubeconfig of its own (no user kubeconfig or cache is touched)."""
    assert KUBECTL is not None
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server}}],
                "users": [{"name": "fake", "user": {}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                "current-context": "fake",
            }
        ),
        encoding="utf-8",
    )
    command = [KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "kube-cache"), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, env={"HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed (not a Debian package; a fresh CI machine lacks it)"
)
def test_kubectl_get_events_shows_one_readable_line_per_decision(
    rig: Rig, kube_client: k8s.ApiClient, tmp_path: Path
) -> None:
    waits, idle = _scenario(rig, kube_client, "enforce")
    table = _kubectl(tmp_path, rig.kube.url, "get", "events", "-A")
    header, *lines = table.splitlines()
    assert re.split(r"\s{2,}", header.strip()) == ["NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    rows = sorted(tuple(re.split(r"\s{2,}", line.strip(), maxsplit=5)[i] for i in (0, 2, 3, 4, 5)) for line in lines)
    decisions = [r for r in rows if r[2] != "LeaderElected"]
    pool = f"configmap/{STATE}"
    why = RELEASE
    held = f"held: no trustworthy demand for {CLASS}; holding"
    expected = (
        [
            ("default", "Normal", "Cordoned", f"node/{n}", f"cordoned to shrink pool {ON_DEMAND} from 3 to 1 units")
            for n in (waits, idle)
        ]
        + [
            ("default", "Normal", "DrainStarted", f"node/{n}", f"evicting pods to shrink pool {ON_DEMAND}: {why}")
            for n in (waits, idle)
        ]
        + [
            (
                "default",
                "Normal",
                "DrainFinished",
                f"node/{n}",
                f"pool {ON_DEMAND}: node {n} drained; deleting 1 nodes: {n}",
            )
            for n in (waits, idle)
        ]
        + [
            (
                "default",
                "Normal",
                "DrainWaiting",
                f"node/{idle}",
                f"pool {ON_DEMAND}: node {idle} cordoned and empty; removed at the drain's next step if its pods are "
                "still none",
            ),
            (
                "default",
                "Warning",
                "DrainBlocked",
                f"node/{waits}",
                f"pool {ON_DEMAND}: waiting for disruption budgets to allow evicting [('default', 'web')] from "
                f"{waits}: The disruption budget web needs 1 healthy pods and has 1 currently (PodDisruptionBudget)",
            ),
            (
                "leadtime",
                "Normal",
                "ScaleDown",
                pool,
                f"pool {ON_DEMAND}: scale down from 3 to 1 units by draining {waits}, {idle}: {why}",
            ),
            (
                "leadtime",
                "Normal",
                "ScaleUp",
                pool,
                f"pool {SPOT}: scale up from 0 to 1 units: {TRIMMED_UP}",
            ),
            ("leadtime", "Warning", "HeldMissingData", pool, f"pool {ON_DEMAND}: {held}"),
            ("leadtime", "Warning", "HeldMissingData", pool, f"pool {SPOT}: {held}"),
        ]
    )
    trims = [r for r in decisions if r[2] == "BudgetTrimmed"]
    assert len(trims) == 1 and trims[0][4].startswith(f"pool {SPOT}: budget 'spot-hourly' (hourly cap 20.00 USD)")
    assert [r for r in decisions if r[2] != "BudgetTrimmed"] == sorted(expected)

    counts = _kubectl(tmp_path, rig.kube.url, "get", "events", "-A", "-o", "custom-columns=REASON:.reason,COUNT:.count")
    assert sorted(line.split() for line in counts.splitlines()[1:] if "Drain" in line or "Held" in line) == sorted(
        [["DrainStarted", "1"]] * 2
        + [["DrainFinished", "1"]] * 2
        + [["DrainBlocked", "3"]]
        + [["DrainWaiting", "1"]]  # the idle node, cordoned and empty, removed at its drain's next step
        + [["HeldMissingData", "2"]] * 2
    )
    described = _kubectl(tmp_path, rig.kube.url, "describe", "configmap", STATE, "-n", "leadtime")
    shown = described.split("Events:", maxsplit=1)[1]
    for reason in ("BudgetTrimmed", "ScaleUp", "ScaleDown"):
        assert shown.count(f" {reason} ") == 1
    assert shown.count("(x2 over") == 2  # each pool held on two ticks: one Event each, shown with its count


def test_in_dry_run_the_same_decisions_are_events_marked_as_recommendations(
    rig: Rig, kube_client: k8s.ApiClient
) -> None:
    waits, idle = _scenario(rig, kube_client, "dry-run")
    events = [e for e in _events(kube_client) if e.reason != "LeaderElected"]
    assert all(e.message.startswith("dry-run: ") for e in events)
    reasons = {(e.involved_object.kind, e.reason) for e in events}
    assert {
        ("ConfigMap", "RecommendScaleUp"),
        ("ConfigMap", "BudgetTrimmed"),
        ("ConfigMap", "RecommendScaleDown"),
        ("ConfigMap", "HeldMissingData"),
        ("Node", "RecommendDrain"),
    } <= reasons
    # nothing was cordoned or drained, and no Event says so
    assert not {r for _, r in reasons} & {"ScaleUp", "ScaleDown", "Cordoned", "DrainStarted", "DrainFinished"}
    drains = sorted(e.involved_object.name for e in events if e.reason == "RecommendDrain")
    assert drains == sorted((waits, idle))
    ups = {(e.message, e.count) for e in events if e.reason == "RecommendScaleUp"}
    would = f"dry-run: pool {SPOT}: would scale up from 0 to 1 units:"
    # the trimmed first recommendation, then spot's 8 chips once the on-demand pool's two units have been idle for
    # the window (with its scale-down): nothing moved, and a recommended drain starts their idle window again, so
    # they hold their chips on the later ticks
    assert ups == {(f"{would} {TRIMMED_UP}", 1), (f"{would} {RELEASE}", 1)}
