"""A TPU slice its drain removes with pods still terminating on some of its hosts is told once, naming the slice,
each pod with its host and why it never finished; a slice drained clean tells nothing.

At the drain's timeout a slice left only with pods no kubelet finishes (a host whose kubelet is gone, its node
``Ready`` Unknown; a host whose live kubelet cannot stop a container) is deleted anyway, and the drain's outcome
carries one warning (``DrainOutcome.alerts``), which the executor tells (``tests/e2e/test_drain_unfinished_pods_alert``
for a node, through the agent's loop). KubernetesSliceDrainer on the fake Kubernetes API, deleting slices through
GkeTpuSliceActuator on the fake GKE API, driven by the agent's drains as the daemon does."""

from __future__ import annotations

from datetime import timedelta

from agent.drains import NodeDrains
from models import ActionResult, ActionStatus, AlertEvent, AlertKind, Resize, Severity, UnfinishedPod
from tests.actuators import test_slice_drain as slice_rig
from tests.actuators.test_slice_drain import POOL, Slices

slices = slice_rig.slices  # three idle 4-host slices, each host running a web pod and a DaemonSet's pod

TICKS = 25  # a minute apart: past the drain's timeout (15m) and a pod's grace period and STUCK_AFTER


def _drain(rig: Slices, dead_host: str) -> tuple[list[ActionResult], list[AlertEvent]]:
    """Release slices v5e-0 and v5e-1 and carry their drains on every minute for ``TICKS`` minutes: their results and
    the alerts their steps raised. ``dead_host``: that host's kubelet dies right after the drain evicted its pods."""
    drains = NodeDrains({POOL: rig.drainer}, timedelta(0))
    started = drains.scale_down(Resize(POOL, 3, 1, "idle", "r1"), rig.clock.now(), ["v5e-0", "v5e-1"])
    results, alerts = list(started.results), list(started.alerts)
    rig.kube.stop_kubelet(dead_host)
    for _ in range(TICKS):
        rig.clock.advance(timedelta(minutes=1))
        step = drains.continue_pending(rig.clock.now())
        results += step.results
        alerts += step.alerts
    return results, alerts


def test_a_slice_removed_with_a_dead_hosts_pod_and_a_stuck_one_is_told_once_and_one_drained_clean_not(
    slices: Slices,
) -> None:
    hosts = slices.hosts("v5e-1")
    slices.kube.hang_pods(hosts[1])  # a live kubelet that never finishes the evicted pod

    results, alerts = _drain(slices, dead_host=hosts[3])

    assert [r.status for r in results if r.key.endswith("v5e-0")] == [ActionStatus.STARTED, ActionStatus.DONE]
    [clean] = [r for r in results if r.key.endswith("v5e-0") and r.status is ActionStatus.DONE]
    assert clean.unfinished == ()
    statuses = [r.status for r in results if r.key.endswith("v5e-1")]
    assert statuses == [ActionStatus.STARTED] * (len(statuses) - 1) + [ActionStatus.DONE]
    [removed] = [r for r in results if r.key.endswith("v5e-1") and r.status is ActionStatus.DONE]
    assert slices.statuses() == {"v5e-0": "STOPPING", "v5e-1": "STOPPING", "v5e-2": "RUNNING"}
    assert removed.unfinished == (
        UnfinishedPod("default", f"web-{hosts[3]}", hosts[3], kubelet_gone=True),
        UnfinishedPod("default", f"web-{hosts[1]}", hosts[1], kubelet_gone=False),
    )
    [alert] = alerts  # the clean drain's removal raised none
    assert (alert.kind, alert.severity, alert.at) == (AlertKind.DRAIN_UNFINISHED_PODS, Severity.WARNING, removed.at)
    assert alert.subject == f"slice v5e-1 of {POOL} removed with pods still terminating"
    assert f"Slice v5e-1 of pool {POOL} was removed by its drain (key {removed.key})" in alert.summary
    assert f"default/web-{hosts[3]} was left by a kubelet that stopped posting" in alert.summary
    assert f"default/web-{hosts[1]} was stuck terminating on a live kubelet" in alert.summary
    assert alert.details["left by a dead kubelet"] == f"default/web-{hosts[3]} on {hosts[3]}"
    assert alert.details["stuck on a live kubelet"] == f"default/web-{hosts[1]} on {hosts[1]}"
