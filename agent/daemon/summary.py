"""The daily report: what the agent did since the last one, as one readable message.

Counts are kept in memory from each tick's report; the report is sent through the notifier and logged, then the
counts start again. A replica that did not lead all day says so. The summary names the window's length when it is
not a day (the first report after a start: "in the last 3m"). The length is the one on the monotonic clock when the
window's ends were read on it too: when the wall clock was stepped in between (a clock set days ahead and corrected
back), the summary gives the real length and says by how much the wall clock was stepped ("in the last 23h (the wall
clock was stepped back 3d meanwhile)"); without them, the wall clock's length, or the window's start when the wall
clock has been stepped back behind that.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta

from agent.daemon.ports import TickReport
from models import AlertEvent, AlertKind, BudgetSnapshot, Severity
from models.durations import format_duration

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

    def add_tick(self, role: str, outcome: str) -> None:
        with self._lock:
            self._ticks[f"{role} {outcome}"] += 1

    def add_error(self, error: BaseException) -> None:
        with self._lock:
            self._errors[type(error).__name__] += 1

    def add_report(self, report: TickReport) -> None:
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

    def close(self, now: datetime, identity: str, mode: str, monotonic: float | None = None) -> AlertEvent:
        """The report for [since, now), and a fresh start; ``monotonic``: now on the monotonic clock."""
        with self._lock:
            since = self._since
            real = None
            if monotonic is not None and self._since_monotonic is not None:
                real = timedelta(seconds=monotonic - self._since_monotonic)
            self._since_monotonic = monotonic
            details = {
                "window": f"{since.isoformat()} .. {now.isoformat()}",
                "replica": identity,
                "mode": mode,
                "ticks": _line(self._ticks),
                "actions": _line(self._actions),
                "skips": _line(self._skips),
                "errors": _line(self._errors),
            }
            for name, budget in sorted(self._budgets.items()):
                cap = f" of {budget.cap_usd:,.0f}" if budget.cap_usd is not None else ""
                spent, projected = budget.spent_usd, budget.projected_usd
                elsewhere = budget.reserved_elsewhere_usd
                theirs = f", of which {elsewhere:,.2f} reserved by the other agents sharing it" if elsewhere else ""
                details[f"budget {name}"] = f"spent {spent:,.2f}{cap} USD, projected {projected:,.2f}{theirs}"
            acted, errors = sum(self._actions.values()), sum(self._errors.values())
            led = any(key.startswith("leader") for key in self._ticks)
            self._since = now
            self._ticks.clear()
            self._actions.clear()
            self._skips.clear()
            self._errors.clear()
            self._budgets.clear()
        window = _window(since, now, real)
        summary = (
            f"{acted} action(s), {errors} error(s) {window}" if led else f"this replica did not lead {window} (standby)"
        )
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
