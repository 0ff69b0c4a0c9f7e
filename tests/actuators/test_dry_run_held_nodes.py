"""A dry run tells the idle nodes a drain could not empty, as enforce mode does.

The survey does not offer as idle a node running no accelerator work but holding a pod that must not be disrupted,
and the agent warns about each such node ('idle node NODE of POOL not drained'). The dry-run drainer passed the idle
nodes through but not the held ones, so a dry run, the mode an operator first runs in, left such a node out of its
recommendations and said nothing about it. The agent's drains through the daemon's leader-only wrapper around the
dry-run drainer, with the real clients against the fake Kubernetes and GKE APIs."""

from __future__ import annotations

from actuators.dry_run import DryRunDrainer
from agent.daemon.guard import LeaderOnlyDrainer
from agent.drains import NodeDrains
from tests.actuators import kubernetes_drain_rig as rig
from tests.actuators.kubernetes_drain_rig import Cluster
from tests.actuators.test_drains_held_back import WINDOW, _bare, _Leads, _patches, _ticks

cluster = rig.cluster


def test_a_dry_run_warns_about_an_idle_node_no_drain_can_empty(cluster: Cluster) -> None:
    c = cluster
    node = c.nodes[1]
    c.kube.put("pods", _bare(node))
    dry = DryRunDrainer(c.drainer, c.clock)
    drains = NodeDrains({"a": LeaderOnlyDrainer(dry, _Leads(), c.clock)}, WINDOW)

    run = _ticks(c, drains, node, 6)

    assert (run.offered, run.rejected, dry.recorded, _patches(c, node)) == (0, 0, [], 0)
    assert all(len(tick) == 1 for tick in run.alerts)
    alert = run.alerts[-1][0]
    assert alert.subject == f"idle node {node} of a not drained"
    assert "default/debug-shell (no controller recreates it)" in alert.summary
    assert dry.held_units("a") == c.drainer.held_units("a")
