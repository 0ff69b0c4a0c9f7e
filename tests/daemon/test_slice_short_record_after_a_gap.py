"""The record of since when a TPU slice has been short of hosts, read back from the planner memory, never shortens a
new wait: whole live daemons (the real loop, the GKE slice adapter on the fake GKE and Compute Engine APIs, the planner
memory in the ConfigMap ``leadtime-state`` on the fake Kubernetes API), a slice of 4 hosts with a 20-minute wait.

A record only holds while the slice was watched without a break (``actuators.short_slices``): a slice repaired and
short again while no agent watched it, or while the leader's saves were refused, would otherwise inherit the first
episode's time and be deleted a minute or two into its new wait; a slice deleted and created again under the same
name would inherit the old one's; and a stale copy of the ConfigMap written back would revive an ended wait.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from agent.daemon.wiring import AssembledDaemon
from agent.ledger.sqlite import SqliteLedger
from tests.daemon.test_slice_release import HOSTS
from tests.daemon.test_slice_short_wait_across_restarts import SLICE, STOCKOUT, T0, WAIT, Rig, _rig, recover_whole
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


def _short_for_a_while(rig: Rig, until_minutes: int = 8) -> AssembledDaemon:
    first = rig.start("leadtime-0")
    rig.run_until(first, T0 + timedelta(minutes=3))
    rig.fall_short()
    rig.run_until(first, T0 + timedelta(minutes=until_minutes))
    return first


def _repair(rig: Rig) -> None:
    """The slice is recovered whole (every host recreated, each a new instance): whole and serving again."""
    recover_whole(rig)


def _config_map_writes(kube: FakeKubeApi) -> int:
    return sum(1 for r in kube.requests if r.resource == "configmaps" and r.verb in ("update", "create", "patch"))


def test_a_slice_repaired_and_short_again_while_no_agent_ran_waits_its_whole_new_wait(rig: Rig) -> None:
    _stop(_short_for_a_while(rig))  # saved: short since 09:04
    _repair(rig)  # while no agent runs
    rig.clock.advance(timedelta(hours=2))
    rig.fall_short()  # 11:08
    rig.clock.advance(timedelta(minutes=1))
    back = rig.clock.now()
    second = rig.start("leadtime-1")
    rig.run_until(second, back + timedelta(minutes=2))
    assert rig.status() == "RUNNING_WITH_ERROR"  # was deleted at 11:10, "short of hosts for 2h6m"
    saved = rig.saved()["slices_short_since"]
    assert isinstance(saved, dict)
    first_read = (back + timedelta(minutes=1)).isoformat()
    entry = saved["v5e-slices"][SLICE]
    assert (entry["since"], entry["seen"]) == (first_read, first_read)  # its wait starts again
    _stop(second)


def test_a_slice_created_again_under_the_same_name_while_no_agent_ran_waits_from_its_creation(rig: Rig) -> None:
    first = _short_for_a_while(rig, until_minutes=13)  # saved: short since 09:04, seen at 09:10
    _stop(first)
    rig.clock.advance(timedelta(minutes=2))  # an operator deletes the slice and creates it again at 09:15 ...
    del rig.gke.pools[SLICE]
    for i in range(2, HOSTS):
        rig.kube.delete("nodes", f"gke-ml-{SLICE}-{i}")
    rig.gke.now = rig.clock.now()
    rig.gke.add_pool(SLICE, nodes=HOSTS)
    for instance in rig.gke.pools[SLICE].migs[0].instances[:2]:  # ... two of its hosts never created (a stockout)
        instance.action, instance.error = "CREATING", STOCKOUT
    rig.gke.report_error(SLICE, status="RUNNING_WITH_ERROR")
    created = rig.clock.now()
    rig.clock.advance(timedelta(minutes=1))
    second = rig.start("leadtime-1")  # within an unbroken watch of the old record: only the creation tells
    rig.run_until(second, created + WAIT - timedelta(minutes=1))
    assert rig.status() == "RUNNING_WITH_ERROR"  # was deleted at 09:24, 9 minutes after its creation
    rig.run_until(second, created + WAIT)
    assert rig.status() == "STOPPING"  # given up at its creation + the wait
    _stop(second)


def test_a_stale_copy_of_the_config_map_written_back_does_not_revive_an_ended_wait(rig: Rig) -> None:
    first = _short_for_a_while(rig)
    api = k8s.CoreV1Api(rig.client)
    copy = api.read_namespaced_config_map("leadtime-state", "leadtime").data  # an operator's copy, short since T+4m
    _repair(rig)
    rig.run_until(first, T0 + timedelta(minutes=60))
    rig.fall_short()
    rig.run_until(first, T0 + timedelta(minutes=62))  # short again since T+61m
    config_map = api.read_namespaced_config_map("leadtime-state", "leadtime")
    config_map.data = copy  # written back (to restore a block, say)
    api.replace_namespaced_config_map("leadtime-state", "leadtime", config_map)
    rig.run_until(first, T0 + timedelta(minutes=63))
    assert rig.status() == "RUNNING_WITH_ERROR"  # was deleted at T+63m, "short of hosts for 59m"
    rig.run_until(first, T0 + timedelta(minutes=61) + WAIT)
    assert rig.status() == "STOPPING"  # given up at the end of its own wait
    _stop(first)


def test_saves_refused_while_the_slice_was_repaired_and_short_again_do_not_shorten_the_wait_after_a_restart(
    rig: Rig,
) -> None:
    first = _short_for_a_while(rig)
    rig.kube.fail_next(1000, 403, verb="update", resource="configmaps")  # every save refused (RBAC, a webhook)
    _repair(rig)
    rig.run_until(first, T0 + timedelta(minutes=60))
    rig.fall_short()
    rig.run_until(first, T0 + timedelta(minutes=62))  # the store still says short since T+4m
    saved = rig.saved()["slices_short_since"]
    assert isinstance(saved, dict)
    entry = saved["v5e-slices"][SLICE]
    assert (entry["since"], entry["seen"]) == (SHORT_AT.isoformat(), SHORT_AT.isoformat())
    _stop(first)
    rig.clock.advance(timedelta(minutes=1))
    second = rig.start("leadtime-1")
    rig.run_until(second, T0 + timedelta(minutes=65))
    assert rig.status() == "RUNNING_WITH_ERROR"  # was deleted at T+64m, "short of hosts for 1h"
    _stop(second)


def test_a_leader_whose_first_memory_reads_fail_keeps_the_wait_it_watched_meanwhile(rig: Rig) -> None:
    _stop(_short_for_a_while(rig, until_minutes=13))  # saved: short since T+4m, seen at T+10m
    rig.clock.advance(timedelta(minutes=1))
    rig.kube.fail_next(3, 500, verb="get", resource="configmaps")  # the new leader reads its memory at T+18m
    second = rig.start("leadtime-1")
    rig.run_until(second, SHORT_AT + WAIT - timedelta(minutes=1))
    assert rig.status() == "RUNNING_WITH_ERROR"
    rig.run_until(second, SHORT_AT + WAIT)  # its watch read the slice short from T+15m: one unbroken watch
    assert rig.status() == "STOPPING"
    _stop(second)


def test_a_steady_shortage_rewrites_the_config_map_once_a_quarter_wait_not_every_tick(rig: Rig) -> None:
    first = _short_for_a_while(rig, until_minutes=6)
    before = _config_map_writes(rig.kube)
    rig.run_until(first, T0 + timedelta(minutes=16))  # 10 ticks
    assert _config_map_writes(rig.kube) - before == 2  # the last seen time refreshed at T+10m and T+16m
    _stop(first)


def test_a_slice_created_again_whole_and_short_again_within_a_watch_does_not_inherit_the_old_wait(rig: Rig) -> None:
    _stop(_short_for_a_while(rig, until_minutes=13))  # saved: short since T+4m, seen at T+10m
    rig.clock.advance(timedelta(minutes=1))  # T+14m: deleted and created again, whole
    del rig.gke.pools[SLICE]
    rig.gke.now = rig.clock.now()
    rig.gke.add_pool(SLICE, nodes=HOSTS)
    for i in range(2):
        rig.kube.put("nodes", objs.node(f"gke-ml-{SLICE}-{i}", SLICE, accelerators=4, resource=objs.TPU_RESOURCE))
    rig.clock.advance(timedelta(minutes=1))
    rig.fall_short()  # T+15m: two of its hosts lost
    rig.clock.advance(timedelta(minutes=1))
    second = rig.start("leadtime-1")  # its first read at T+17m: within an unbroken watch of the old record
    first_read = T0 + timedelta(minutes=17)
    rig.run_until(second, first_read + WAIT - timedelta(minutes=1))
    assert rig.status() == "RUNNING_WITH_ERROR"  # was deleted at T+24m, 9 minutes after it fell short
    rig.run_until(second, first_read + WAIT)
    assert rig.status() == "STOPPING"  # its own wait, from the new leader's first read
    _stop(second)
