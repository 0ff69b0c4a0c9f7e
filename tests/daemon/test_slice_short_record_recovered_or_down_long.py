"""The record of since when a TPU slice has been short of hosts, read back from the planner memory, tells a slice
recovered and short again from one still short, by its hosts, and holds within an unbroken watch only: whole live
daemons (the real loop, the GKE slice adapter on the fake GKE and Compute Engine APIs, the planner memory in the
ConfigMap ``leadtime-state`` on the fake Kubernetes API), a slice of 4 hosts with a 20-minute wait.

A multi-host slice is recovered whole, each host a new instance with a new id (tests/fakes/REFERENCE.md). A record of
a time alone could not tell: a slice recovered and short again within a rollout of a few minutes took the earlier
time and was deleted early in its new wait. The record keeps the ids of the slice's hosts with the time. An agent down
longer than an unbroken watch allows starts the wait again: the hosts of a slice restarted in place keep their ids, so
they cannot tell a long gap's recovery, and the slice is kept longer rather than deleted early.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from agent.daemon.wiring import AssembledDaemon
from agent.ledger.sqlite import SqliteLedger
from tests.daemon.test_slice_short_wait_across_restarts import SLICE, T0, WAIT, Rig, _rig, recover_whole
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


def _short_until(rig: Rig, minutes: int) -> None:
    """A first agent watches the slice fall short at T0 + 3m (first read short at T0 + 4m) and stops at ``minutes``."""
    first = rig.start("leadtime-0")
    rig.run_until(first, T0 + timedelta(minutes=3))
    rig.fall_short()
    rig.run_until(first, T0 + timedelta(minutes=minutes))
    _stop(first)


def _entry_saved(rig: Rig) -> dict[str, object]:
    short = rig.saved()["slices_short_since"]
    assert isinstance(short, dict)
    entry: dict[str, object] = short["v5e-slices"][SLICE]
    return entry


def test_a_slice_recovered_and_short_again_during_a_rollout_waits_its_whole_new_wait(rig: Rig) -> None:
    _short_until(rig, 10)  # saved: short since T+4m, with its two running hosts' ids
    before = _entry_saved(rig)
    recover_whole(rig)  # T+10m: the old pod gone, the slice recovered whole ...
    rig.clock.advance(timedelta(minutes=1))
    rig.fall_short()  # ... and two of its hosts lost again at T+11m
    rig.clock.advance(timedelta(minutes=1))
    second = rig.start("leadtime-1")  # its first read at T+13m: well within an unbroken watch of the record
    first_read = T0 + timedelta(minutes=13)
    rig.run_until(second, first_read)
    after = _entry_saved(rig)
    rig.run_until(second, first_read + WAIT - timedelta(minutes=1))
    assert rig.status() == "RUNNING_WITH_ERROR"  # was deleted at T+24m, 13 minutes after it fell short
    rig.run_until(second, first_read + WAIT)
    assert rig.status() == "STOPPING"  # its own wait, from the new leader's first read
    _stop(second)
    assert before["since"] == SHORT_AT.isoformat() and after["since"] == first_read.isoformat()
    old, new = before["hosts"], after["hosts"]
    assert isinstance(old, list) and isinstance(new, list)
    assert len(old) == len(new) == 2 and not set(old) & set(new)  # the hosts it has now are not those of then


def test_a_slice_still_short_after_an_agent_was_down_longer_than_a_watch_waits_again_from_its_first_read(
    rig: Rig,
) -> None:
    _short_until(rig, 6)  # saved: short since T+4m, with its two running hosts' ids
    rig.clock.advance(timedelta(minutes=8))  # no agent for 8 minutes, longer than an unbroken watch allows
    second = rig.start("leadtime-1")
    first_read = T0 + timedelta(minutes=15)
    rig.run_until(second, first_read + WAIT - timedelta(minutes=1))
    assert rig.status() == "RUNNING_WITH_ERROR"  # the same hosts, but restarted in place they would keep their ids
    rig.run_until(second, first_read + WAIT)
    assert rig.status() == "STOPPING"  # its wait started again at the new leader's first read: kept, never lost early
    _stop(second)


def test_an_agent_restarted_more_often_than_the_wait_within_a_watch_each_time_gives_the_slice_up(rig: Rig) -> None:
    _short_until(rig, 5)  # saved: short since T+4m
    for n in range(1, 8):  # a crash loop: down a minute, up two
        rig.clock.advance(timedelta(minutes=1))
        agent = rig.start(f"leadtime-{n}")
        rig.run_until(agent, rig.clock.now() + timedelta(minutes=2))
        _stop(agent)
        if n == 3:
            assert rig.status() == "RUNNING_WITH_ERROR"  # T+14m: still waited for
    assert rig.status() == "STOPPING"  # given up at T+25m, the first tick from the end of its first wait
