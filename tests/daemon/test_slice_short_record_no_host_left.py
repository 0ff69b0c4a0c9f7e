"""A record naming the hosts of a TPU slice short of hosts is not taken, by a new leader, for the slice short of every
host: whole live daemons (the real loop, the GKE slice adapter on the fake GKE and Compute Engine APIs, the planner
memory in the ConfigMap ``leadtime-state`` on the fake Kubernetes API), a slice of 4 hosts with a 20-minute wait.

A multi-host slice is recovered whole, each host recreated (tests/fakes/REFERENCE.md), and in a stockout none of them
may have a VM: the slice has no host id at all, none new to the record. Taken for the same shortfall, a slice
recovered and short again so inherited the record's time and was deleted 13 minutes after it fell short again.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from tests.daemon.test_slice_short_record_recovered_or_down_long import SHORT_AT, _entry_saved, _short_until
from tests.daemon.test_slice_short_wait_across_restarts import SLICE, STOCKOUT, T0, WAIT, Rig, _rig, recover_whole
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


def _recovered_whole_with_no_room(rig: Rig) -> None:
    """A host fails and the slice is recovered whole in a stockout: every host recreated, none has a VM."""
    for i, instance in enumerate(rig.gke.pools[SLICE].migs[0].instances):
        instance.action, instance.error = "RECREATING", STOCKOUT
        rig.kube.delete("nodes", f"gke-ml-{SLICE}-{i}")
    rig.gke.report_error(SLICE, status="RUNNING_WITH_ERROR")


def test_a_slice_recovered_whole_and_short_of_every_host_again_waits_its_whole_new_wait(rig: Rig) -> None:
    _short_until(rig, 10)  # short since T+4m, two hosts running: saved with their ids
    saved = _entry_saved(rig)
    recover_whole(rig)  # T+10m, no agent: whole again and serving
    rig.clock.advance(timedelta(minutes=1))
    _recovered_whole_with_no_room(rig)  # T+11m: short of every host
    rig.clock.advance(timedelta(minutes=1))
    second = rig.start("leadtime-1")
    first_read = T0 + timedelta(minutes=13)
    rig.run_until(second, first_read + WAIT - timedelta(minutes=1))
    assert rig.status() == "RUNNING_WITH_ERROR"  # was deleted at T+24m, 13 minutes after it fell short again
    rig.run_until(second, first_read + WAIT)
    assert rig.status() == "STOPPING"  # its own wait, from the new leader's first read
    assert saved["since"] == SHORT_AT.isoformat() and len(saved["hosts"]) == 2  # type: ignore[arg-type]
