"""The daily report's counts across leaders: which window's counts a replica that starts leading takes over from the
planner memory the replicas share (``PlannerMemory.day_counts``), how they add up with its own, and how the report
names who led the window.

Every replica closes its summary at the same scheduled report time, the leader sending the report; the leader keeps
its window's counts in the planner memory (``SharesDayCounts``: the daemon's loop, ``agent.daemon.adapters``) after
each of its ticks, a failed one too, each run of a replica's under its own name (``incarnation``: its identity and its
start, so a container restarted in the same pod is another run), with who led the window (by identity) and since when.
A replica that starts leading (a new term of the loop) takes over those of the same window: every other run's counts
as stored, an earlier run of its own pod's included, its own as it holds them (it counted them itself, the stored ones
may miss its last ticks), so each is counted once however often the lead changes hands.
The same window: one that starts no earlier than ``WINDOW_SLACK`` before the report time the replica last closed a
window at (the other replica closed at the same report time, seconds apart; a window a day earlier was reported
already); until its first report, before the last scheduled report time at or before its start, as if it had closed
a window there (the daemon tells its summary the configured time). A summary not told the report time matches a
window that started more than ``WINDOW_SLACK`` less than a day before its own start (report times are a day apart, and
the leader keeps its new window's start at its first tick after the report). What this cannot tell apart: a window
begun at a replica's start rather than at a report time (the deployment's first day), less than ``WINDOW_SLACK``
before a report time, whose leader sent its report and stopped before its next tick: a replica started since takes it
over and its counts are reported twice (not told the report time: one started within a day of that start). Past
``REPLICAS_KEPT`` runs in a window, the counts of the runs a later run of the same pod superseded are kept added up
first (a pod restarting in a crash loop), then those of the replicas that led longest ago: only past
``REPLICAS_KEPT`` - 2 replicas in a window is a replica's newest run added up, and counted twice if it leads again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from math import inf
from typing import Protocol, runtime_checkable

from agent.planning.memory import DayCounts, ReplicaCounts

# How much earlier than this replica's the start of a window saved by another may be and still be the same window:
# both closed theirs at the same scheduled report time, a busy scheduler a few seconds (its misfire grace) late.
WINDOW_SLACK = timedelta(hours=1)
# The leader's counts go in the planner memory after a tick that counted an action, and after one that counted only
# skips and errors when they last went in this long before: a new leader may miss its predecessor's latest skips and
# errors, never its actions, and the state ConfigMap is not written every tick for a skip.
DAY_COUNTS_REFRESH = timedelta(minutes=15)
LED_KEPT = 10  # who led the window: the latest this many takeovers (those before them only counted)
REPLICAS_KEPT = 16  # runs whose counts are kept apart; superseded runs, then those that led longest ago, added up
EARLIER = "(earlier leaders)"  # the name those are kept under


@dataclass(frozen=True)
class DayRead:
    """The planner memory's counts as the loop's term ``term`` read them: ``at``, the term's first tick as leader;
    ``read``, whether the memory has been read in the term (``counts`` is what it held: None, none kept)."""

    term: int
    at: datetime
    read: bool
    counts: DayCounts | None


@runtime_checkable
class SharesDayCounts(Protocol):
    """Where the leader keeps the daily report's counts for the next leader: the planner memory, through the loop."""

    def day_read(self) -> DayRead:
        """What the current term read of the counts kept."""
        ...

    def keep_day(self, counts: DayCounts) -> bool:
        """Hold ``counts`` in the planner memory and save them when due; False when they are not saved."""
        ...


def same_window(stored: datetime, since: datetime, closed: bool) -> bool:
    """Whether a window saved as starting at ``stored`` is the one this replica counts since ``since``: ``closed``,
    whether ``since`` is a report time (this replica closed a window there, or the last one scheduled before its
    start) rather than the replica's start."""
    if closed:
        return stored >= since - WINDOW_SLACK
    return since - stored < timedelta(days=1) - WINDOW_SLACK


def incarnation(identity: str, started: datetime) -> str:
    """The name a run of a replica keeps its counts under: its identity and its start, as a container restarted in the
    same pod (the same identity) is another run, whose counts of the window are not those of the run before it."""
    return f"{identity}@{started.isoformat()}"


def _identity(name: str) -> str:
    """The identity of the replica whose run's counts are kept under ``name`` (a release before kept them under it)."""
    return name.partition("@")[0]


def _started(name: str) -> float:
    """The start of the run whose counts are kept under ``name``, as a POSIX time (-inf: none in it, or unreadable)."""
    try:
        return datetime.fromisoformat(name.partition("@")[2]).timestamp()
    except ValueError:
        return -inf


def most(a: ReplicaCounts | None, b: ReplicaCounts) -> ReplicaCounts:
    """One replica's counts as the fuller of two views gives them: each count only grows within a window."""
    if a is None:
        return b
    return ReplicaCounts(*(_most(getattr(a, n), getattr(b, n)) for n in ("actions", "skips", "errors")))


def _most(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {key: max(a.get(key, 0), b.get(key, 0)) for key in sorted(a.keys() | b.keys())}


def kept(others: Mapping[str, ReplicaCounts], led: Iterable[tuple[str, datetime]]) -> dict[str, ReplicaCounts]:
    """``others`` bounded to ``REPLICAS_KEPT`` - 1 names, the rest added up under ``EARLIER``: first the runs a later
    run of the same pod superseded (they never lead again: a pod restarting in a crash loop leaves many), then the
    newest runs of the replicas that led longest ago (or not at all); a replica's newest run is kept apart before any
    superseded one, so that a replica alive all along that leads again finds its counts kept apart, not added up."""
    if len(others) < REPLICAS_KEPT:
        return dict(others)
    order = {identity: i for i, (identity, _) in enumerate(led)}
    names = [n for n in others if n != EARLIER]
    newest: dict[str, float] = {}
    for name in names:
        newest[_identity(name)] = max(newest.get(_identity(name), -inf), _started(name))

    def rank(name: str) -> tuple[bool, int, float]:
        identity = _identity(name)
        return _started(name) == newest[identity], order.get(identity, -1), _started(name)

    names.sort(key=rank, reverse=True)
    out = {n: others[n] for n in names[: REPLICAS_KEPT - 2]}
    folded = [others[n] for n in others if n not in out]
    out[EARLIER] = ReplicaCounts(*(_sum(getattr(c, n) for c in folded) for n in ("actions", "skips", "errors")))
    return out


def _sum(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for one in counts:
        total.update(one)
    return dict(total)


def led_line(led: tuple[tuple[str, datetime], ...], before: int) -> str:
    """Who led the window: "replica-a until 14:02, replica-b since" (UTC), those left out counted first."""
    parts = [f"{before} earlier leader(s)"] if before else []
    for (identity, _), (_, until) in pairwise(led):
        parts.append(f"{identity} until {until:%H:%M}")
    if led:
        parts.append(f"{led[-1][0]} since" if len(led) > 1 or before else led[-1][0])
    return ", ".join(parts)
