"""A scale-up the agent cannot judge is not called stalled: whole live daemons (Lease election, the real agent loop,
the fake GKE, Kubernetes and Prometheus APIs, a simulated clock), their /metrics page read over HTTP.

``leadtime_pool_scale_up_waiting_since_seconds`` says "the cloud is not delivering" to ``LeadtimeScaleUpStuck``
(tests/deploy/monitoring_rules_test.yaml), so it carries only what a recent tick judged on a pool it read: while the
leader does not tick, a scale-up whose nodes have joined since is no longer exported (``LeadtimeNotTicking`` tells
that), and while a pool cannot be read its scale-up is neither alerted on nor exported (``LeadtimePoolUnreadable``
tells that); read again, it is judged on its whole wait since it was asked. A replica that leads again after another
leader resized its pool judges nothing its earlier term asked for."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from agent.daemon.wiring import AssembledDaemon
from agent.notify import RecordingNotifier
from models import AlertKind
from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import NODE_POOLS, SPOT, Rig
from tests.e2e.scale_up_wait_rig import MINUTE, _ask_for_three_spot_nodes, _waiting

notifier = scale_up_wait_rig.notifier
assembled = scale_up_wait_rig.assembled  # replica leadtime-0, enforcing, its /metrics page served


def _stalled(notifier: RecordingNotifier) -> list[tuple[datetime, str, dict[str, str]]]:
    return [(e.at, e.summary, dict(e.details)) for e in notifier.events if e.kind is AlertKind.STALLED_SCALE_UP]


def _ready(rig: Rig) -> int:
    return sum(1 for i in rig.gke.pools[NODE_POOLS[SPOT]].migs[0].instances if i.action == "NONE")


def test_a_leader_that_does_not_tick_exports_no_scale_up_it_has_not_judged_for_two_ticks(
    rig: Rig, assembled: AssembledDaemon, notifier: RecordingNotifier
) -> None:
    asked = _ask_for_three_spot_nodes(rig, assembled)
    assert _waiting(assembled) == {SPOT: asked.timestamp()}
    # its ticks stop (one hangs, or each fails before it reads the pools) while it renews the Lease; the nodes join
    for minute in range(1, 25):
        rig.clock.advance(MINUTE)
        assembled.daemon.elect()
        if minute == 10:
            rig.settle()
        page = _waiting(assembled)
        assert page == ({SPOT: asked.timestamp()} if minute <= 2 else {}), minute  # judged two ticks ago at most
    assert _ready(rig) == 3 and _stalled(notifier) == []

    assembled.daemon.tick()  # it ticks again: it reads the pool ready, and the scale-up is over
    assert _waiting(assembled) == {} and _stalled(notifier) == []


def test_a_scale_up_of_a_pool_that_cannot_be_read_is_judged_once_the_pool_is_read_again(
    rig: Rig, assembled: AssembledDaemon, notifier: RecordingNotifier
) -> None:
    asked = _ask_for_three_spot_nodes(rig, assembled)  # its nodes never join
    rig.gke.fail_next(10_000, 500, "Internal error. Please try again.", path=NODE_POOLS[SPOT])
    unread: list[Any] = []
    for _ in range(30):  # Compute answers 500 for the pool: 30 minutes, past the 20 minutes a scale-up may wait
        rig.clock.advance(MINUTE)
        assembled.daemon.elect()
        assembled.daemon.tick()
        unread += [e for e in notifier.events if e.kind is AlertKind.POOL_UNREADABLE and e not in unread]
        assert _waiting(assembled) == {}, rig.clock.now()
    assert unread, "the pool's read was never told failing"
    assert _stalled(notifier) == []  # not 'still not ready after 20m' with 'ready units: unknown'

    with rig.gke._lock:  # Compute answers again
        rig.gke._faults.clear()
    rig.clock.advance(MINUTE)
    assembled.daemon.elect()
    assembled.daemon.tick()
    now = rig.clock.now()
    assert _waiting(assembled) == {SPOT: asked.timestamp()}  # its whole wait counts
    ((at, summary, details),) = _stalled(notifier)
    assert at == now and "is still not ready after 31m" in summary
    assert details == {"ready units": "0", "asked": "0 -> 3 units"}


def test_the_ready_units_of_a_pool_read_again_end_its_scale_up_without_an_alert(
    rig: Rig, assembled: AssembledDaemon, notifier: RecordingNotifier
) -> None:
    _ask_for_three_spot_nodes(rig, assembled)
    rig.gke.fail_next(10_000, 500, "Internal error. Please try again.", path=NODE_POOLS[SPOT])
    for minute in range(1, 25):
        rig.clock.advance(MINUTE)
        if minute == 10:
            rig.settle()  # the nodes join within the lead time, unseen
        assembled.daemon.elect()
        assembled.daemon.tick()
        assert _waiting(assembled) == {}, rig.clock.now()
    with rig.gke._lock:
        rig.gke._faults.clear()
    rig.clock.advance(MINUTE)
    assembled.daemon.elect()
    assembled.daemon.tick()
    assert _ready(rig) == 3 and _waiting(assembled) == {} and _stalled(notifier) == []


def test_a_stalled_scale_up_is_not_told_over_while_its_pool_cannot_be_read(
    rig: Rig, assembled: AssembledDaemon, notifier: RecordingNotifier
) -> None:
    asked = _ask_for_three_spot_nodes(rig, assembled)  # its nodes never join
    while not _stalled(notifier):
        assert rig.clock.now() < asked + timedelta(minutes=30), "the agent never called the scale-up stalled"
        rig.clock.advance(MINUTE)
        assembled.daemon.elect()
        assembled.daemon.tick()
    rig.gke.fail_next(10_000, 500, "Internal error. Please try again.", path=NODE_POOLS[SPOT])
    for _ in range(15):  # longer than alerts.resolve_after: an end would be told
        rig.clock.advance(MINUTE)
        assembled.daemon.elect()
        assembled.daemon.tick()
    ended = [e for e in notifier.events if e.kind is AlertKind.STALLED_SCALE_UP and e.resolved]
    assert ended == []  # unread, it is not known to be over
