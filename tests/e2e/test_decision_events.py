"""Every decision of a live daemon is a Kubernetes Event a person can read: listed through the real
``kubernetes`` client, and with ``kubectl get events`` (when kubectl is installed), against the fake API.

One scenario on ``leadtime run``'s live wiring (Lease election, the state ConfigMap, GKE node pools, drains
through the Kubernetes API): a budget cap trims the spot pool's scale-up, two idle on-demand nodes are drained
(one waits on a PodDisruptionBudget for several ticks), then the demand metric disappears and the pools are held.
"""

from __future__ import annotations

import json
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


def _scenario(rig: Rig, kube: k8s.ApiClient, mode: str) -> tuple[str, str]:
    """Runs the scenario; returns (the node whose drain waited on the budget, the idle node drained at once)."""
    rig.add_pools(on_demand_nodes=3)
    busy, waits, idle = rig.mirror.nodes(ON_DEMAND)
    rig.kube.put("pods", objs.pod("train", busy, namespace=CLASS, accelerators=8))
    rig.kube.put("pods", objs.pod("web", waits, labels={"app": "web"}, owner_kind="ReplicaSet"))
    rig.kube.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, min_available=1), group="policy")
    rig.prometheus.set_demand(CLASS, 24)
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
    rig.prometheus.set_demand(CLASS, 8)
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
    events = _events(kube_client)
    for e in events:
        print(e.metadata.namespace, e.involved_object.kind, e.involved_object.name, e.reason, e.count, e.message)
    assert False
