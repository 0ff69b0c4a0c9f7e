"""The record of since when a TPU slice has been short of hosts keeps the hosts the slice had when first seen short
(those still there at every read since, never one that came up since) and holds only within an unbroken watch: whole
live daemons (the real loop, the GKE slice adapter on the fake GKE and Compute Engine APIs, the planner memory in the
ConfigMap ``leadtime-state`` on the fake Kubernetes API), a slice of 4 hosts with a 20-minute wait.

A record that kept the hosts of the latest read named the new VMs of a recovery still booting when the agent stopped:
the slice whole again and short again later had some of those hosts, and the new leader took the first episode's
time. A record naming no host (every host being recreated, no VM in a stockout) was dropped at every restart, so a
crash loop never gave the slice up.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from agent.daemon.wiring import AssembledDaemon
from agent.ledger.sqlite import SqliteLedger
from tests.daemon.test_slice_release import HOSTS
from tests.daemon.test_slice_short_wait_across_restarts import SLICE, STOCKOUT, T0, WAIT, Rig, _rig
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

SHORT_AT = T0 + timedelta(minutes=4)  # the first read that finds the slice short (it falls short after T0 + 3m)


@pytest.fixture
def rig(
    prometheus_api: FakePrometheusApi,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> Rig:
    return _rig(prometheus_api, gke_api, kube_api, kube_client, tmp_path)


def _stop(daemon: AssembledDaemon) -> None:
    """The process ends: its ledger file's lock goes with it."""
    daemon.daemon.stop_working()
    ledger = daemon.loop.agent.parts.ledger
    assert isinstance(ledger, SqliteLedger)
    ledger.close()


def _entry_saved(rig: Rig) -> dict[str, object]:
    short = rig.saved()["slices_short_since"]
    assert isinstance(short, dict)
    entry: dict[str, object] = short["v5e-slices"][SLICE]
    return entry


def _no_host_left(rig: Rig) -> None:
    """The slice being recovered whole in a stockout: every host deleted and being recreated, none has a VM."""
    for i, instance in enumerate(rig.gke.pools[SLICE].migs[0].instances):
        instance.action, instance.error = "RECREATING", STOCKOUT
        rig.kube.delete("nodes", f"gke-ml-{SLICE}-{i}")
    rig.gke.report_error(SLICE, status="RUNNING_WITH_ERROR")


def test_a_recovery_booting_at_the_last_save_then_whole_and_short_again_waits_its_whole_new_wait(rig: Rig) -> None:
    first = rig.start("leadtime-0")
    rig.run_until(first, T0 + timedelta(minutes=3))
    rig.fall_short()  # hosts 0 and 1 lost, no room to recreate them: first read short at T+4m
    rig.run_until(first, T0 + timedelta(minutes=8))
    for instance in rig.gke.pools[SLICE].migs[0].instances:  # T+8m: room found, recovered whole: every host
        instance.action, instance.error = "RECREATING", ""  # recreated, each a new VM (a new id) ...
        instance.status = "PROVISIONING"  # ... that exists, booting, while the group still recreates it
    rig.run_until(first, T0 + timedelta(minutes=10))
    saved = _entry_saved(rig)
    _stop(first)
    for instance in rig.gke.pools[SLICE].migs[0].instances:  # T+10m, no agent: whole and serving ...
        instance.action = "NONE"
    rig.gke.report_error(SLICE, status="RUNNING")
    for i in range(HOSTS):
        rig.kube.put("nodes", objs.node(f"gke-ml-{SLICE}-{i}", SLICE, accelerators=4, resource=objs.TPU_RESOURCE))
    rig.clock.advance(timedelta(minutes=1))
    rig.fall_short()  # ... and the same two hosts lost again at T+11m
    rig.clock.advance(timedelta(minutes=1))
    second = rig.start("leadtime-1")
    first_read = T0 + timedelta(minutes=13)
    rig.run_until(second, first_read + WAIT - timedelta(minutes=1))
    assert rig.status() == "RUNNING_WITH_ERROR"  # was deleted at T+24m, 13 minutes after it fell short again
    rig.run_until(second, first_read + WAIT)
    assert rig.status() == "STOPPING"  # its own wait, from the new leader's first read
    _stop(second)
    assert saved["since"] == SHORT_AT.isoformat()
    assert saved["hosts"] == []  # the two hosts of its first short read were recreated since: none named


def test_a_slice_with_no_host_left_restarted_within_a_minute_is_given_up_at_the_end_of_its_first_wait(
    rig: Rig,
) -> None:
    first = rig.start("leadtime-0")
    rig.run_until(first, T0 + timedelta(minutes=3))
    _no_host_left(rig)
    rig.run_until(first, T0 + timedelta(minutes=14))
    saved = _entry_saved(rig)
    _stop(first)
    rig.clock.advance(timedelta(minutes=1))  # an ordinary rollout: the new pod leads a minute later
    second = rig.start("leadtime-1")
    rig.run_until(second, SHORT_AT + WAIT - timedelta(minutes=1))
    assert rig.status() == "RUNNING_WITH_ERROR"
    rig.run_until(second, SHORT_AT + WAIT)
    assert rig.status() == "STOPPING"  # was T+35m: the record dropped, the wait started again at T+15m
    _stop(second)
    assert saved["since"] == SHORT_AT.isoformat()
    assert saved["hosts"] == []  # no host existed when it was first seen short


def test_a_crash_loop_gives_up_a_slice_with_no_host_left(rig: Rig) -> None:
    first = rig.start("leadtime-0")
    rig.run_until(first, T0 + timedelta(minutes=3))
    _no_host_left(rig)
    rig.run_until(first, T0 + timedelta(minutes=5))
    _stop(first)
    for n in range(1, 4):  # down a minute, up nine, three times: never up for a whole wait
        rig.clock.advance(timedelta(minutes=1))
        agent = rig.start(f"leadtime-{n}")
        rig.run_until(agent, rig.clock.now() + timedelta(minutes=9))
        _stop(agent)
        if n == 1:
            assert rig.status() == "RUNNING_WITH_ERROR"  # T+15m: still waited for
    assert rig.status() == "STOPPING"  # given up at T+24m; the wait restarted at every start, for ever
