"""A replica that leads again after another replica led forgets its drains' memory; one whose own lease was renewed
late, nobody else leading in between, keeps it.

Replica A leads and drains a node of a GKE pool under ``move-bounds``. When B leads in between (A's Lease API cut
off, B taking the lease after its duration) and then hands the lease back (released, or lapsed), A's memory of the
drain is stale: B may have settled it (the node removed, its stuck pod told as ``drain-unfinished-pods``, the bounds
moved) or sent its removal. A remembered a removal B settled, listed it, settled it again and told the warning a
second time; and a drain it had started, whose removal B sent, it ended for a scale-up when one read of the pool
failed, uncordoning a node the cloud was deleting. Now the first leader tick of a term taken from another holder's or
an emptied record forgets the drains' memory (the daemon's resume: ``AgentLoopAdapter.resume``, ``NodeDrains.forget``
through the leader-only drainer) and takes the drains over from their nodes' marks.

A renewal of A's own record, however late, with one of its ticks run as a standby's meanwhile, forgets nothing: its
removal under way is settled once the node is gone (the warning told, the bounds moved), a node it left cordoned
while the cloud deleted it is uncordoned once the cloud keeps it, and its blocked drain's timeout is not started
again. Whole daemons (election, tick job, adapter) on the fake Kubernetes and GKE APIs, one simulated clock."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest

from agent.drains import NodeDrains
from models import ActionResult, ActionStatus, AlertKind
from models.clock import SimulatedClock
from tests.actuators.test_drain_removal_under_way import (
    BOUNDS,
    UNAVAILABLE,
    _action,
    _cordoned,
    _fails_again,
)
from tests.daemon.drain_replicas import (
    DrainReplica,
    bounds,
    drain,
    gone,
    hand_over,
    minute,
    until_left_deleting,
    until_removal_went_out,
)
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

DELETES = "/deleteInstances"


# -- another replica led in between ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("released", "tick_in_round", "answer_lost"),
    [(True, False, False), (False, False, False), (True, True, False), (True, False, True)],
    ids=["handed-back", "lapsed-back", "handed-back-tick-inside-the-round", "handed-back-answer-lost"],
)
def test_a_removal_another_leader_settled_is_not_settled_and_told_again(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
    released: bool,
    tick_in_round: bool,
    answer_lost: bool,
) -> None:
    """``tick_in_round``: A's process stalls while B leads (no round or tick of A's runs: A's last tick was a leader
    tick), and A's first tick as leader starts inside the round that takes the lease back, once the round has the
    answer of its write, before it returns (the tick and election threads): it forgets all the same, as the round
    asks for the resume before it takes the lease and the term is counted before A leads in it. ``answer_lost``: the
    API server applies A's take, whose answer is lost (a read timeout): A's next round finds the record naming A and
    renews it, and that is the new term the take began."""
    a, b, node = drain_replicas
    a.loop.acts.append(drain(node))
    until_removal_went_out(clock, gke_api, a, b)

    hand_over(clock, a, b, frozen=tick_in_round)  # B takes the drain over and follows the removal A sent
    for m in range(4):
        if m == 2:
            gone(gke_api, kube_api, node)
        minute(clock, b, *([] if tick_in_round else [a]))
    assert b.loop.results[-1].status is ActionStatus.DONE, b.loop.results[-1]
    assert [e.kind for e in b.loop.told] == [AlertKind.DRAIN_UNFINISHED_PODS]
    assert bounds(gke_api) == (2, 2)
    bounds_moves = gke_api.calls("POST", BOUNDS)

    hand_over(clock, b, a, released=released, tick_in_round=tick_in_round, answer_lost=answer_lost)  # A leads again
    settled = len(a.loop.results)
    for _ in range(3):
        minute(clock, a, *([] if released else [b]))

    assert a.loop.results[settled:] == []  # was the drain settled DONE again
    assert [e.kind for e in a.loop.told + b.loop.told] == [AlertKind.DRAIN_UNFINISHED_PODS]  # was told twice
    assert gke_api.calls("POST", BOUNDS) == bounds_moves  # nothing asked of the cloud for it again
    assert a.drains.pending == ()


def test_a_removal_another_leader_settled_is_not_told_again_after_that_leader_led_for_a_day(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
) -> None:
    """B settles the removal A sent (told once), then leads for a day (the clock a day later, one tick of B's, A
    standing by, which steps no drain and keeps its removal) and hands the lease back. The planner memory B saved at
    that tick still names the drain: A forgets its removal and tells nothing. The memory kept the drains settled for
    a day at most: B's tick dropped the drain, and A settled it and told the warning a second time."""
    a, b, node = drain_replicas
    a.loop.acts.append(drain(node))
    until_removal_went_out(clock, gke_api, a, b)

    hand_over(clock, a, b)
    for m in range(4):
        if m == 2:
            gone(gke_api, kube_api, node)
        minute(clock, b, a)
    assert [e.kind for e in b.loop.told] == [AlertKind.DRAIN_UNFINISHED_PODS]
    bounds_moves = gke_api.calls("POST", BOUNDS)
    clock.advance(timedelta(days=1))  # B leads for a day
    minute(clock, b, a)

    settled = len(a.loop.results)
    hand_over(clock, b, a, released=True)  # A leads again
    for _ in range(3):
        minute(clock, a)

    assert a.loop.results[settled:] == []  # was the drain settled DONE again, at A's first tick
    assert [e.kind for e in a.loop.told + b.loop.told] == [AlertKind.DRAIN_UNFINISHED_PODS]  # was told twice
    assert gke_api.calls("POST", BOUNDS) == bounds_moves  # the bounds' move asked for again
    assert a.drains.pending == ()


@pytest.mark.parametrize("memory", ["read", "unreadable"])
def test_a_removal_under_way_whose_node_went_before_the_other_leaders_first_tick_is_settled_when_a_leads_again(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
    memory: str,
) -> None:
    """A sent the removal (GKE took the deleteInstances, the bounds' move answered 503) and is cut off; the instance
    and its Node object go before B's first tick as leader, so nothing in the cluster records the drain and B never
    sees it. A leads again after B: the removal it remembers is its to settle (the stuck pod told, the bounds moved),
    the planner memory B saved naming no such drain settled. Forgotten with the rest of A's drains' memory, it was
    never settled: the warning lost and GKE's autoscaler bounds left 3-3 on a 2-node pool. ``unreadable``: the planner
    memory A loads cannot be read (treated as none saved): the removal is settled all the same."""
    a, b, node = drain_replicas
    a.loop.acts.append(drain(node))
    until_removal_went_out(clock, gke_api, a, b)
    gone(gke_api, kube_api, node)

    hand_over(clock, a, b)
    for _ in range(3):
        minute(clock, b, a)
    assert b.loop.results == [] and b.drains.pending == ()  # B never saw the drain

    if memory == "unreadable":
        a.loop.store.document = "{not json"
    hand_over(clock, b, a, released=True)  # A leads again: its first tick settles the removal
    minute(clock, a)

    assert [e.kind for e in a.loop.told + b.loop.told] == [AlertKind.DRAIN_UNFINISHED_PODS]  # was never told
    assert bounds(gke_api) == (2, 2)  # was left at 3-3
    assert [r.status for r in a.loop.results if r.key.endswith(node)][-1] is ActionStatus.DONE
    assert a.drains.pending == ()


def test_a_drain_whose_removal_another_leader_sent_is_not_ended_when_a_read_fails_at_a_take_back(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
) -> None:
    """A started the drain, a disruption budget holding its pod; B took it over, evicted the pod once the budget
    allowed it and removed the node past its own timeout, the pod stuck terminating (GKE took the deleteInstances,
    the bounds' move answered 503). A leads again; a scale-up takes back the drains of idle nodes, and one read of
    the pool answers 503: A ended its own drain, whose removal it never asked for, and uncordoned a node the cloud
    was deleting."""
    a, b, node = drain_replicas
    kube_api.put("poddisruptionbudgets", objs.pdb("web", {"app": "web"}, max_unavailable=0), group="policy")
    a.loop.acts.append(drain(node))
    minute(clock, a, b)
    assert a.loop.results[-1].status is ActionStatus.STARTED  # waiting for the disruption budget
    assert "disruption budget" in a.loop.results[-1].detail

    hand_over(clock, a, b)
    kube_api.delete("poddisruptionbudgets", "web", "default", group="policy")
    until_removal_went_out(clock, gke_api, b, a)
    assert _action(gke_api, node) == "DELETING"

    hand_over(clock, b, a, released=True)  # A leads again: its first tick took the drain over
    taken_back: list[str] = []

    def take_back(drains: NodeDrains, now: datetime) -> Sequence[ActionResult]:
        gke_api.fail_next(1, 503, UNAVAILABLE, path="listManagedInstances")
        taken_back.extend(drains.take_back("gpu", 1, now))
        return []

    a.loop.acts.append(take_back)
    minute(clock, a)

    assert taken_back == []  # was the node
    assert _cordoned(kube_api, node)  # was uncordoned while the cloud deleted it
    assert [p.node for p in a.drains.pending] == [node]
    gke_api.advance()  # the cloud deletes it; its Node object outlives it a while
    minute(clock, a)
    done = a.loop.results[-1]
    assert done.status is ActionStatus.DONE, done
    assert [e.kind for e in a.loop.told + b.loop.told] == [AlertKind.DRAIN_UNFINISHED_PODS]


# -- this replica's own lease renewed late, nobody else leading ----------------------------------------------------
def test_a_removal_under_way_is_settled_after_a_late_renewal(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
) -> None:
    """The instance and its Node object go while A's renewal is late: A remembers the removal it sent (nothing in the
    cluster records it any more), settles the drain once the cloud says the node is gone, tells its stuck pod and
    moves the bounds."""
    a, b, node = drain_replicas
    a.loop.acts.append(drain(node))
    until_removal_went_out(clock, gke_api, a, b)
    assert bounds(gke_api) == (3, 3)

    gone(gke_api, kube_api, node)
    minute(clock, a, b, standby_tick=True)  # a tick as standby, then its own record renewed
    minute(clock, a, b)

    assert [r.status for r in a.loop.results][-1] is ActionStatus.DONE
    assert [e.kind for e in a.loop.told] == [AlertKind.DRAIN_UNFINISHED_PODS]  # was never told
    assert bounds(gke_api) == (2, 2)  # was left at 3 on a 2-node pool
    assert b.loop.results == []


def test_a_node_left_cordoned_while_deleted_is_uncordoned_after_a_late_renewal_once_the_cloud_keeps_it(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
) -> None:
    a, b, node = drain_replicas
    a.loop.acts.append(drain(node))
    until_left_deleting(clock, gke_api, a, b)
    assert [e.kind for e in a.loop.told] == [AlertKind.DRAIN_DELETION_OVERDUE]
    assert _cordoned(kube_api, node)

    minute(clock, a, b, standby_tick=True)  # a tick as standby, then its own record renewed
    _fails_again(gke_api, node)  # the cloud stops deleting it
    minute(clock, a, b)

    assert not _cordoned(kube_api, node)  # was cordoned for good
    assert [(e.kind, e.resolved) for e in a.loop.told][-1] == (AlertKind.DRAIN_DELETION_OVERDUE, True)


def test_a_blocked_drains_timeout_is_not_started_again_by_a_late_renewal(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    gke_api: FakeGkeApi,
    drain_replicas: tuple[DrainReplica, DrainReplica, str],
) -> None:
    """The drain waits for its stuck pod; its timeout counts from its first step, a late renewal of A's own lease in
    between: the node is removed 15 minutes after the drain's first step, not 15 minutes after the renewal."""
    a, b, node = drain_replicas
    a.loop.acts.append(drain(node))
    minute(clock, a, b)
    started = clock.now()
    for m in range(40):
        minute(clock, a, b, standby_tick=m == 8)
        if gke_api.calls("POST", DELETES):
            break
    assert clock.now() - started == timedelta(minutes=15)
    assert b.loop.results == []
