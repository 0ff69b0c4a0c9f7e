"""The daily report: what the agent did since the last one, as one readable message.

Counts are kept in memory from each tick's report; the report is sent through the notifier and logged, then the
counts start again. A replica that did not lead all day says so. The summary names the window's length when it is
not a day (the first report after a start: "in the last 3m"). The length is the one on the monotonic clock when the
window's ends were read on it too: when the wall clock was stepped in between (a clock set days ahead and corrected
back), the summary gives the real length and says by how much the wall clock was stepped ("in the last 23h (the wall
clock was stepped back 3d meanwhile)"); without them, the wall clock's length, or the window's start when the wall
clock has been stepped back behind that.

The report covers the window whoever led it: a loop that keeps the counts in the planner memory the replicas share
(``agent.daemon.day_counts.SharesDayCounts``, handed over in each leader tick's report as ``day_share``, or to
``keep`` after a failed leader tick) is given the leader's counts after each tick, under the name of this run of the
replica (a container restarted in the same pod is another run), and a replica that starts leading takes over those of
the same window, so its report counts the actions, skips and errors of its predecessors of the day too (an earlier
run of its own pod's included), each once, and says who led the window and when the lead changed hands ("led by").
Told the configured report time (``scheduled``, by the runtime when it adds the report job), a replica started since
the last report time before then matches the window kept as one begun at that report time. When the memory could not
be read since it took over, its report has its own counts and says that the day before that is not in it.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from datetime import UTC, datetime, time, timedelta

from agent.daemon.day_counts import (
    EARLIER,
    LED_KEPT,
    DayRead,
    SharesDayCounts,
    incarnation,
    kept,
    led_line,
    most,
    same_window,
)
from agent.daemon.ports import TickReport
from agent.planning.memory import DayCounts, ReplicaCounts
from models import AlertEvent, AlertKind, BudgetSnapshot, Severity
from models.durations import format_duration

log = logging.getLogger(__name__)

# A report this close to a day after the previous one covers "the last day"; a window whose wall-clock length is
# further than this from its monotonic length had the wall clock stepped in it (NTP slewing moves it by 43 s a day at
# most)
DAY_TOLERANCE = timedelta(minutes=1)


class DailySummary:
    def __init__(self, since: datetime, since_monotonic: float | None = None) -> None:
        """``since``: the window's start on the wall clock, and ``since_monotonic`` on the monotonic clock (its
        length is then told from that clock when ``close`` is given the monotonic time too)."""
        self._lock = threading.Lock()
        self._since = since
        self._since_monotonic = since_monotonic
        self._ticks: Counter[str] = Counter()
        self._actions: Counter[str] = Counter()
        self._skips: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        self._budgets: dict[str, BudgetSnapshot] = {}
        self._identity: str | None = None  # this replica's name: "led by" names it
        self._started = since  # this run's start: its counts are kept under its name and this (``incarnation``)
        self._closed = False  # whether ``_since`` is a report time (else the replica's start)
        self._report_at: datetime | None = None  # the last scheduled report time at or before the start, when told
        self._term: int | None = None  # the loop's term whose read of the kept counts was last handled
        self._taken = False  # whether that term's read has been taken over
        self._unread_at: datetime | None = None  # this replica took over then, the kept counts not read since
        self._others: dict[str, ReplicaCounts] = {}  # the other replicas' counts of the window, taken over
        self._led: list[tuple[str, datetime]] = []  # who led the window, each since when
        self._led_before = 0  # takeovers before those in ``_led``

    def named(self, identity: str) -> None:
        """This replica's name, under which its counts are kept for the next leader."""
        with self._lock:
            self._identity = identity

    def scheduled(self, at: time, now: datetime | None = None) -> None:
        """The configured daily report time (UTC): until its first report this summary's window is matched with the
        counts kept as if it had closed one at the last report time at or before ``now``, when the report job was
        added (its first run is the next one after it), or else at or before the summary's start."""
        with self._lock:
            start = (self._started if now is None else now).astimezone(UTC)
            last = datetime.combine(start.date(), at, tzinfo=UTC)
            self._report_at = last if last <= start else last - timedelta(days=1)

    def add_tick(self, role: str, outcome: str) -> None:
        with self._lock:
            self._ticks[f"{role} {outcome}"] += 1

    def add_error(self, error: BaseException) -> None:
        with self._lock:
            self._errors[type(error).__name__] += 1

    def add_report(self, report: TickReport) -> None:
        """Count a leader tick's report; a loop that keeps the counts for the next leader (``day_share``) is given
        them (saved outside the lock: a ConfigMap write)."""
        with self._lock:
            for result in report.results:
                self._actions[str(result.status)] += 1
            if report.plan is not None:
                for skip in report.plan.skips:
                    self._skips[str(skip.reason)] += 1
            for error in report.errors:
                self._errors[type(error).__name__] += 1
            for budget in report.budgets:
                self._budgets[budget.budget] = budget
            keep = self._to_keep(getattr(report, "day_share", None))
        self._keep(keep)

    def keep(self, share: object) -> None:
        """Give a loop that keeps the counts for the next leader (``SharesDayCounts``) this replica's counts after a
        leader tick that failed (its error counted with ``add_error``), as ``add_report`` does after one that did not:
        a leader whose ticks fail leaves its errors to the next one too. Never raises: counts that cannot be read,
        taken over or saved are logged, and the failed tick goes on (its alert is sent)."""
        try:
            with self._lock:
                keep = self._to_keep(share)
        except Exception as exc:  # noqa: BLE001 - as a failed save: the next leader's report lacks them
            log.warning("daily report counts not kept for the next leader: %s: %s", type(exc).__name__, exc)
            return
        self._keep(keep)

    def _to_keep(self, share: object) -> tuple[SharesDayCounts, DayCounts] | None:
        if not isinstance(share, SharesDayCounts) or self._identity is None:
            return None
        self._hand_over(share.day_read(), self._identity)
        return (share, self._kept(self._identity)) if self._taken else None

    @staticmethod
    def _keep(keep: tuple[SharesDayCounts, DayCounts] | None) -> None:
        if keep is None:
            return
        try:
            keep[0].keep_day(keep[1])
        except Exception as exc:  # noqa: BLE001 - the next leader's report lacks them; the tick is over
            log.warning("daily report counts not kept for the next leader: %s: %s", type(exc).__name__, exc)

    def _hand_over(self, read: DayRead, identity: str) -> None:
        """Take over the counts kept of this window when the loop's term has read them for the first time."""
        if read.term == self._term and (self._taken or not read.read):
            return
        self._term, self._taken = read.term, read.read
        if not read.read:  # the memory not read yet: its own counts alone, until it is
            self._unread_at = read.at
            return
        self._unread_at = None
        stored = read.counts
        closed, since = self._closed, self._since
        if not closed and self._report_at is not None:
            closed, since = True, self._report_at
        own = incarnation(identity, self._started)
        if stored is not None and same_window(stored.since, since, closed):
            if EARLIER in stored.replicas:  # those it took over before and no longer kept apart are added up there
                for name in [n for n in self._others if n not in stored.replicas]:
                    del self._others[name]
            for name, counts in stored.replicas.items():
                if name != own:  # its own: as it holds them (the stored ones may miss its last ticks)
                    self._others[name] = most(self._others.get(name), counts)
            if len(stored.led) + stored.led_before >= len(self._led) + self._led_before:
                self._led, self._led_before = list(stored.led), stored.led_before
            if stored.since < self._since:  # a replica started since the report time: the window is the day's
                self._since, self._since_monotonic = stored.since, None
        if not self._led or self._led[-1][0] != identity:
            self._led.append((identity, read.at))
        if len(self._led) > LED_KEPT:
            self._led_before += len(self._led) - LED_KEPT
            del self._led[: len(self._led) - LED_KEPT]

    def _kept(self, identity: str) -> DayCounts:
        if not self._led:  # leading since the window's start
            self._led.append((identity, self._since))
        own = ReplicaCounts(dict(self._actions), dict(self._skips), dict(self._errors))
        replicas = {**kept(self._others, self._led), incarnation(identity, self._started): own}
        return DayCounts(self._since, tuple(self._led), replicas, self._led_before)

    def close(self, now: datetime, identity: str, mode: str, monotonic: float | None = None) -> AlertEvent:
        """The report for [since, now), and a fresh start; ``monotonic``: now on the monotonic clock."""
        with self._lock:
            since = self._since
            real = None
            if monotonic is not None and self._since_monotonic is not None:
                real = timedelta(seconds=monotonic - self._since_monotonic)
            self._since_monotonic = monotonic
            actions, skips, errors = Counter(self._actions), Counter(self._skips), Counter(self._errors)
            for counts in self._others.values():
                actions.update(counts.actions)
                skips.update(counts.skips)
                errors.update(counts.errors)
            details = {
                "window": f"{since.isoformat()} .. {now.isoformat()}",
                "replica": identity,
                "mode": mode,
                "ticks": _line(self._ticks),
                "actions": _line(actions),
                "skips": _line(skips),
                "errors": _line(errors),
            }
            if self._led:
                details["led by"] = led_line(tuple(self._led), self._led_before)
            unread = self._unread_at
            if unread is not None:
                details["not in it"] = (
                    f"what other replicas counted before {unread:%H:%M} UTC, when this replica took over: the "
                    "planner memory they keep it in could not be read since"
                )
            for name, budget in sorted(self._budgets.items()):
                cap = f" of {budget.cap_usd:,.0f}" if budget.cap_usd is not None else ""
                spent, projected = budget.spent_usd, budget.projected_usd
                elsewhere = budget.reserved_elsewhere_usd
                theirs = f", of which {elsewhere:,.2f} reserved by the other agents sharing it" if elsewhere else ""
                details[f"budget {name}"] = f"spent {spent:,.2f}{cap} USD, projected {projected:,.2f}{theirs}"
            acted, failed = sum(actions.values()), sum(errors.values())
            led = any(key.startswith("leader") for key in self._ticks)
            self._since, self._closed = now, True
            self._ticks.clear()
            self._actions.clear()
            self._skips.clear()
            self._errors.clear()
            self._budgets.clear()
            self._others.clear()
            self._led.clear()
            self._led_before = 0
            self._unread_at = None
        window = _window(since, now, real)
        summary = (
            f"{acted} action(s), {failed} error(s) {window}" if led else f"this replica did not lead {window} (standby)"
        )
        if led and unread is not None:
            summary += f"; the day before {unread:%H:%M} UTC is not in it (the planner memory could not be read)"
        return AlertEvent(AlertKind.DAILY_REPORT, Severity.INFO, now, f"daily/{identity}", summary, details)


def _window(since: datetime, now: datetime, real: timedelta | None) -> str:
    """The report's window in words: "in the last day" for a day (to within ``DAY_TOLERANCE``, a report run late by
    a busy scheduler), its length otherwise. ``real``: its length on the monotonic clock, when known; the words say
    so when the wall clock was stepped in it. Without it, the window's start when the wall clock has been stepped
    back behind that."""
    wall = now - since
    length = wall if real is None else real
    if length < timedelta(0):
        return f"since {since:%Y-%m-%d %H:%M} UTC (the wall clock has been stepped back behind it since)"
    words = (
        "in the last day"
        if abs(length - timedelta(days=1)) <= DAY_TOLERANCE
        else f"in the last {format_duration(length)}"
    )
    step = wall - length
    if abs(step) > DAY_TOLERANCE:
        direction = "back" if step < timedelta(0) else "forward"
        words += f" (the wall clock was stepped {direction} {format_duration(abs(step))} meanwhile)"
    return words


def _line(counts: Counter[str]) -> str:
    return ", ".join(f"{key}: {n}" for key, n in sorted(counts.items())) or "none"
