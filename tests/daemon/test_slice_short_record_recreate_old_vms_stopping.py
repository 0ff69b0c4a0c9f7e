"""A record of since when a TPU slice has been short of hosts is not taken for a slice whose hosts the record names are
being recreated: whole live daemons (the real loop, the GKE slice adapter on the fake GKE and Compute Engine APIs, the
planner memory in the ConfigMap ``leadtime-state`` on the fake Kubernetes API), a slice of 4 hosts with a 20-minute
wait.

A recreate deletes an instance's VM before it creates the new one, and the deletion may wait up to 60 s after
connection draining (tests/fakes/REFERENCE.md): a slice recovered whole is listed for a while with the hosts that
survived its earlier shortfall under RECREATING, with their old ids and instanceStatus STOPPING. Counted as hosts left,
those ids made the recovery read as the same shortfall, and the new leader took the earlier time.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from tests.daemon.test_slice_release import HOSTS
from tests.daemon.test_slice_short_record_recovered_or_down_long import SHORT_AT, _entry_saved, _short_until, _stop
from tests.daemon.test_slice_short_wait_across_restarts import SLICE, STOCKOUT, T0, WAIT, Rig, _rig
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi


@pytest.fixture
def rig(
    prometheus_api: FakePrometheusApi,
    gke_api: FakeGkeApi,
    kube_api: FakeKubeApi,
    kube_client: k8s.ApiClient,
    tmp_path: Path,
) -> Rig:
    return _rig(prometheus_api, gke_api, kube_api, kube_client, tmp_path)


def _lost_hosts_created(rig: Rig) -> None:
    """The group's retries find room for the two lost hosts (new VMs, new ids): the slice is whole again."""
    for instance in rig.gke.pools[SLICE].migs[0].instances[:2]:
        instance.action, instance.error = "NONE", ""
    rig.gke.report_error(SLICE, status="RUNNING")
    for i in range(HOSTS):
        rig.kube.put("nodes", objs.node(f"gke-ml-{SLICE}-{i}", SLICE, accelerators=4, resource=objs.TPU_RESOURCE))


def _recovered_whole_in_a_stockout(rig: Rig, stopping: int) -> None:
    """A host fails and the slice is recovered whole in a stockout: every host RECREATING, the old VMs of the last
    ``stopping`` still being deleted (their old ids, STOPPING), the others' gone, none created."""
    instances = rig.gke.pools[SLICE].migs[0].instances
    for i, instance in enumerate(instances):
        instance.action, instance.error = "RECREATING", STOCKOUT
        rig.kube.delete("nodes", f"gke-ml-{SLICE}-{i}")
    for instance in instances[HOSTS - stopping :]:
        instance.status = "STOPPING"
    rig.gke.report_error(SLICE, status="RUNNING_WITH_ERROR")


def test_a_slice_recovered_whole_read_while_its_old_vms_stop_waits_its_whole_new_wait(rig: Rig) -> None:
    _short_until(rig, 10)  # short since T+4m, saved with the ids of hosts 2 and 3, which run
    saved = _entry_saved(rig)["hosts"]
    instances = rig.gke.pools[SLICE].migs[0].instances
    assert saved == sorted(i.id for i in instances[2:])
    _lost_hosts_created(rig)  # T+10m, no agent: whole again
    rig.clock.advance(timedelta(minutes=1))
    _recovered_whole_in_a_stockout(rig, stopping=2)  # T+11m: short again, hosts 2 and 3's old VMs still stopping
    assert sorted(i.id for i in instances[2:]) == saved  # the fake lists the old VMs with their ids
    rig.clock.advance(timedelta(minutes=1))
    second = rig.start("leadtime-1")
    first_read = T0 + timedelta(minutes=13)
    rig.run_until(second, first_read)  # its first read finds hosts 2 and 3 RECREATING, their old VMs STOPPING
    for instance in instances[2:]:
        instance.status = ""  # deleted: no VM left, none created in the stockout
    after = _entry_saved(rig)
    rig.run_until(second, first_read + WAIT - timedelta(minutes=1))
    assert rig.status() == "RUNNING_WITH_ERROR"  # was deleted at T+24m, 13 minutes after it fell short again
    rig.run_until(second, first_read + WAIT)
    assert rig.status() == "STOPPING"  # its own wait, from the new leader's first read
    _stop(second)
    assert after["since"] == first_read.isoformat() and after["hosts"] == []  # no host it had then is left


def test_a_slice_whose_lost_hosts_old_vms_still_stop_keeps_the_time_of_its_first_short_read(rig: Rig) -> None:
    """The same shortfall read while the lost hosts' old VMs stop: the record is kept, the survivors' ids left."""
    first = rig.start("leadtime-0")
    rig.run_until(first, T0 + timedelta(minutes=3))
    rig.fall_short()  # hosts 0 and 1 lost, their old VMs still being deleted at the first short read
    for instance in rig.gke.pools[SLICE].migs[0].instances[:2]:
        instance.status = "STOPPING"
    rig.run_until(first, SHORT_AT)
    for instance in rig.gke.pools[SLICE].migs[0].instances[:2]:
        instance.status = ""
    rig.run_until(first, T0 + timedelta(minutes=10))
    _stop(first)
    survivors = sorted(i.id for i in rig.gke.pools[SLICE].migs[0].instances[2:])
    assert _entry_saved(rig) == {"since": SHORT_AT.isoformat(), "seen": _entry_saved(rig)["seen"], "hosts": survivors}
    second = rig.start("leadtime-1")
    rig.run_until(second, SHORT_AT + WAIT - timedelta(minutes=1))
    assert rig.status() == "RUNNING_WITH_ERROR"
    rig.run_until(second, SHORT_AT + WAIT)
    assert rig.status() == "STOPPING"  # given up at the end of the wait from its first short read
    _stop(second)
