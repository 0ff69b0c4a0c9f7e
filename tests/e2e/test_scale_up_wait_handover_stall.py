"""A stalled scale-up across a Lease handover, on whole live daemons (Lease election, the real agent loop, the fake
GKE, Kubernetes and Prometheus APIs, a simulated clock): three spot nodes asked for that never join.

* A pool the new leader cannot read at its first tick that acts keeps the scale-up its predecessor saved, taken at
  the first tick that reads it: judged from when it was asked, and told stalled an allowance after the ask.
* The stall its predecessor told stays open across the handover: the new leader judges the saved scale-up stalled at
  its first tick (it was asked more than an allowance before), so the condition is neither ended ("No longer holds"
  with no node ready) nor told as a new one, and it ends, told resolved, when the nodes join.
* A leader whose ticks overrun their interval (one tick at a time: the slot after is skipped) keeps exporting the
  scale-up it judged between two ticks: the judgement is stamped when it ends and stays recent for two ticks and
  the misfire grace.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from agent.daemon.wiring import AssembledDaemon
from models import AlertEvent
from tests.e2e import scale_up_wait_rig
from tests.e2e.rig import NODE_POOLS, SPOT, Rig
from tests.e2e.scale_up_wait_rig import (
    ALLOWANCE,
    MINUTE,
    Replicas,
    _first_leader_asks_for_three_spot_nodes,
    _handover,
    _spot_target,
    _stalled,
    _waiting,
)

replicas = scale_up_wait_rig.replicas  # agent processes started one after another on the same servers


def _raised(events: list[AlertEvent]) -> list[AlertEvent]:
    return [e for e in events if not e.resolved]


def test_a_pool_unread_at_the_new_leader_s_first_tick_keeps_its_saved_scale_up_for_its_first_read(
    rig: Rig, replicas: Replicas
) -> None:
    first, _, asked = _first_leader_asks_for_three_spot_nodes(rig, replicas)
    assert _spot_target(rig) == 3
    second, told = _handover(replicas, first)
    rig.gke.fail_next(2, 500, "Internal error. Please try again.", path=NODE_POOLS[SPOT])
    replicas.tick(second)  # its first tick that acts: the spot pool cannot be read
    assert [p for p in second.loop.agent.budget_watch.pending if p.pool_id == SPOT] == []
    assert SPOT in [p.pool_id for p in second.loop.agent.memory.scale_ups_waited or ()]  # still saved
    replicas.tick(second)
    assert _waiting(second).get(SPOT) == asked.timestamp()  # taken at the first tick that read it, from the ask
    while rig.clock.now() < asked + ALLOWANCE:
        replicas.tick(second)
    (event,) = [e for e in _raised(_stalled(told)) if e.subject == f"pool {SPOT}"]
    assert event.subject == f"pool {SPOT}" and event.at == asked + ALLOWANCE
    assert event.details == {"ready units": "0", "asked": "0 -> 3 units"}


def test_a_stall_told_before_a_handover_stays_open_until_the_nodes_join(rig: Rig, replicas: Replicas) -> None:
    first, first_told, _ = _first_leader_asks_for_three_spot_nodes(rig, replicas)
    while not _stalled(first_told):
        replicas.tick(first)
    raised_at = _stalled(first_told)[0].at
    replicas.tick(first)
    second, told = _handover(replicas, first)
    replicas.tick(second)
    first_read = rig.clock.now()
    for _ in range(ALLOWANCE // MINUTE + 5):  # past the new leader's own allowance: the nodes never came
        replicas.tick(second)
    assert [e for e in _stalled(told) if e.resolved] == []
    raised = _raised(_stalled(told))
    assert raised and raised[0].at == first_read  # told again at once: the saved scale-up is stalled already
    (open_stall,) = [c for c in second.loop.agent.conditions.active if c[1] == f"pool {SPOT}"]
    assert second.loop.agent.conditions.record()[0][open_stall].since == raised_at  # the same condition since

    rig.settle()  # the nodes join at last
    joined = rig.clock.now()
    while not [e for e in _stalled(told) if e.resolved]:
        assert rig.clock.now() < joined + timedelta(hours=1), "the stall never ended once the nodes joined"
        replicas.tick(second)
    (end,) = [e for e in _stalled(told) if e.resolved]
    assert end.details["first raised"] == raised_at.strftime("%Y-%m-%d %H:%M UTC")
    assert end.at > joined


def _overrunning_ticks(rig: Rig, leader: AssembledDaemon, durations: list[int]) -> list[tuple[datetime, bool]]:
    """Run ticks that take ``durations`` seconds each (the plan and the executor, before the scale-ups are judged) as
    the daemon schedules them, every 60 s, one at a time (a slot that comes during a tick is skipped), with the
    election renewing beside them; the page scraped every 10 s: when, and whether the spot scale-up was on it."""
    watch = leader.loop.agent.budget_watch
    judge = watch.alerts
    scrapes: list[tuple[datetime, bool]] = []

    def pass_time(seconds: int) -> None:
        for _ in range(seconds // 10):
            rig.clock.advance(timedelta(seconds=10))
            leader.daemon.elect()
            scrapes.append((rig.clock.now(), SPOT in _waiting(leader)))

    slot = rig.clock.now()
    for duration in durations:

        def slow_judge(*args: object, duration: int = duration, **kwargs: object) -> list[AlertEvent]:
            pass_time(duration)
            return judge(*args, **kwargs)  # type: ignore[arg-type]

        watch.alerts = slow_judge  # type: ignore[method-assign]
        leader.daemon.tick()
        watch.alerts = judge  # type: ignore[method-assign]
        ended = rig.clock.now()
        while slot <= ended:
            slot += MINUTE
        pass_time(int((slot - ended).total_seconds()))
    return scrapes


def test_ticks_that_overrun_their_interval_keep_the_scale_up_on_the_page(rig: Rig, replicas: Replicas) -> None:
    leader, _, _ = _first_leader_asks_for_three_spot_nodes(rig, replicas)
    assert SPOT in _waiting(leader)
    # every tick 70 s (started every 120 s: 120 s between judgements), then ticks of 20 s and 100 s by turns (140 s
    # from a short tick's judgement to the next one's)
    scrapes = _overrunning_ticks(rig, leader, [70] * 3 + [20, 100] * 2)
    assert len(scrapes) == (3 * 120 + 2 * 180) // 10  # every 10 s of the ticks as scheduled
    assert [at for at, present in scrapes if not present] == []
