"""``leadtime_pool_scale_up_waiting_since_seconds`` and ``leadtime_pool_scale_up_stalled_after_seconds`` on a whole
live daemon's /metrics page (Lease election, the real agent loop, the fake GKE, Kubernetes and Prometheus APIs, a
simulated clock), read over HTTP: the leader exports when the oldest scale-up it waits for was asked and how long
the pool allows, and ``LeadtimeScaleUpStuck`` (tests/deploy/monitoring_rules_test.yaml) compares them. A scale-up
whose nodes never join is stalled on the page at the tick the agent's own "Scale-up not ready" alert is raised, not
a tick before; once the nodes join the series is gone."""

from __future__ import annotations

from datetime import datetime, timedelta

from agent.daemon.wiring import AssembledDaemon
from agent.notify import RecordingNotifier
from models import AlertKind
from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import CLASS, NODE_POOLS, ON_DEMAND, SPOT, Rig
from tests.e2e.scale_up_wait_rig import ALLOWED, MINUTE, WAITING, _page

notifier = scale_up_wait_rig.notifier
assembled = scale_up_wait_rig.assembled  # replica leadtime-0, enforcing, its /metrics page served


def _tick(rig: Rig, assembled: AssembledDaemon) -> None:
    rig.clock.advance(MINUTE)
    assembled.daemon.elect()
    assembled.daemon.tick()


def _stalled(notifier: RecordingNotifier) -> list[datetime]:
    return [e.at for e in notifier.events if e.kind is AlertKind.STALLED_SCALE_UP]


def test_the_page_says_a_scale_up_is_stalled_when_the_agent_does(
    rig: Rig, assembled: AssembledDaemon, notifier: RecordingNotifier
) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 24)  # three spot nodes' worth; their instances are created, no node joins
    assembled.daemon.refit()
    allowed = (timedelta(minutes=10) * 2).total_seconds()  # the rig's lead time, the default stalled_after_lead_times
    assert _page(assembled) == {WAITING: {}, ALLOWED: {}}  # not the leader yet: nothing waited for, nothing allowed

    _tick(rig, assembled)
    asked = rig.clock.now()
    assert rig.gke.pools[NODE_POOLS[SPOT]].migs[0].target_size == 3
    assert _page(assembled) == {WAITING: {SPOT: asked.timestamp()}, ALLOWED: {SPOT: allowed, ON_DEMAND: allowed}}

    while not _stalled(notifier):
        now = rig.clock.now().timestamp()
        assert now - _page(assembled)[WAITING][SPOT] < allowed  # the rule stays silent while the agent does
        assert rig.clock.now() < asked + timedelta(hours=1), "the agent never called the scale-up stalled"
        _tick(rig, assembled)

    assert _stalled(notifier) == [rig.clock.now()]
    page = _page(assembled)
    assert page[WAITING] == {SPOT: asked.timestamp()}  # the ticks since, asking for the same, did not restart it
    assert rig.clock.now().timestamp() - page[WAITING][SPOT] == page[ALLOWED][SPOT] == allowed

    rig.settle()  # the nodes join at last
    _tick(rig, assembled)
    assert _page(assembled)[WAITING] == {}
