"""A replica that leads again waits for nothing its earlier term asked for: whole live daemons (Lease election, the
real agent loop, the fake GKE, Kubernetes and Prometheus APIs, a simulated clock), their /metrics page read over HTTP.

Replica leadtime-0 asks for three spot nodes and loses the Lease to leadtime-1, under which they join, the pool goes
down to 2 and is asked for 4. When leadtime-0 leads again, its scale-up of an hour before (0 -> 3, with 2 ready and a
target of 4) must not be called stalled: neither its own earlier term's nor the planner memory's copy of it, which
leadtime-1 (a Lease holder that saved no memory here, as a leader of an earlier release or a stopped one would not)
left as leadtime-0 saved it. No leader judged that scale-up within an unbroken watch of leadtime-0's first read, so it
is not trusted (the pool may have been resized unseen, as it was) and the units then in flight are waited for from
that first tick instead. Whether or not it ran a standby tick between its terms (the Lease can be lost and taken back
between two ticks, or its ticks held up meanwhile), and whether or not its first tick as leader can read its planner
memory."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agent.daemon.wiring import AssembledDaemon
from agent.notify import RecordingNotifier
from models import AlertKind
from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import NODE_POOLS, SPOT, Rig
from tests.e2e.scale_up_wait_rig import MINUTE, _ask_for_three_spot_nodes, _waiting

notifier = scale_up_wait_rig.notifier
assembled = scale_up_wait_rig.assembled  # replica leadtime-0, enforcing, its /metrics page served


def _other_replica_renews(rig: Rig) -> None:
    """leadtime-1 holds the Lease and renews it now."""
    (lease,) = rig.kube.list("leases", group="coordination.k8s.io")
    lease["spec"]["holderIdentity"] = "leadtime-1"
    lease["spec"]["renewTime"] = rig.clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    rig.kube.put("leases", lease, group="coordination.k8s.io")


def _minute_under_the_other_leader(rig: Rig, assembled: AssembledDaemon, standby_ticks: bool) -> None:
    rig.clock.advance(MINUTE)
    _other_replica_renews(rig)
    assembled.daemon.elect()
    if standby_ticks:
        assembled.daemon.tick()


def _lead_again_after_the_other_resized(rig: Rig, assembled: AssembledDaemon, standby_ticks: bool) -> None:
    _ask_for_three_spot_nodes(rig, assembled)
    _minute_under_the_other_leader(rig, assembled, standby_ticks)  # leadtime-0 sees the Lease taken
    rig.settle()  # the three nodes join under leadtime-1
    for _ in range(45):
        _minute_under_the_other_leader(rig, assembled, standby_ticks)
    rig.gke.autoscale(NODE_POOLS[SPOT], 2)  # the pool goes down to 2 ...
    rig.settle()
    for _ in range(10):
        _minute_under_the_other_leader(rig, assembled, standby_ticks)
    rig.gke.autoscale(NODE_POOLS[SPOT], 4)  # ... and is asked for 4: 2 ready, 2 in flight
    rig.mirror.sync()
    _minute_under_the_other_leader(rig, assembled, standby_ticks)
    for _ in range(3):  # leadtime-1 stops renewing; leadtime-0 takes the Lease once it has run out
        rig.clock.advance(timedelta(seconds=20))
        if assembled.daemon.elect().became_leader:
            break
    assert assembled.daemon.elect().leading


def _stalled(notifier: RecordingNotifier) -> list[str]:
    return [e.summary for e in notifier.events if e.kind is AlertKind.STALLED_SCALE_UP]


@pytest.mark.parametrize("standby_ticks", [True, False], ids=["standby-ticks", "no-tick-between-terms"])
def test_a_replica_leading_again_waits_for_the_units_in_flight_from_its_first_tick(
    rig: Rig, assembled: AssembledDaemon, notifier: RecordingNotifier, standby_ticks: bool
) -> None:
    _lead_again_after_the_other_resized(rig, assembled, standby_ticks)
    assert _waiting(assembled) == {}  # nothing of its earlier term before its first tick
    assembled.daemon.tick()
    first = rig.clock.now()
    assert _waiting(assembled) == {SPOT: first.timestamp()}  # the 2 in flight, from this read
    for _ in range(3):
        rig.clock.advance(MINUTE)
        assembled.daemon.elect()
        assembled.daemon.tick()
    assert _waiting(assembled) == {SPOT: first.timestamp()} and _stalled(notifier) == []


def test_a_replica_leading_again_that_cannot_read_its_memory_exports_nothing_of_its_earlier_term(
    rig: Rig, assembled: AssembledDaemon, notifier: RecordingNotifier
) -> None:
    _lead_again_after_the_other_resized(rig, assembled, standby_ticks=False)
    rig.kube.fail_next(1000, 500, verb="get", resource="configmaps")  # its planner memory cannot be read
    pages: list[Any] = []
    for _ in range(4):
        assembled.daemon.tick()  # watches only: plans and judges nothing
        pages.append(_waiting(assembled))
        rig.clock.advance(MINUTE)
        assembled.daemon.elect()
    assert pages == [{}] * 4 and _stalled(notifier) == []
