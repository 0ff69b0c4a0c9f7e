"""The daily report: what the agent did since the last one, as one readable message.

Counts are kept in memory from each tick's report; the report is sent through the notifier and logged, then the
counts start again. A replica that did not lead all day says so. The summary names the window's length when it is
not a day (the first report after a start, one sent at once after a step of the wall clock forward: "in the last
3d"), and its start when the wall clock has been stepped back behind that.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta

from agent.daemon.ports import TickReport
from models import AlertEvent, AlertKind, BudgetSnapshot, Severity
from models.durations import format_duration

# A report this close to a day after the previous one covers "the last day"
DAY_TOLERANCE = timedelta(minutes=1)


class DailySummary:
    def __init__(self, since: datetime) -> None:
        self._lock = threading.Lock()
        self._since = since
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

    def close(self, now: datetime, identity: str, mode: str) -> AlertEvent:
        """The report for [since, now), and a fresh start."""
        with self._lock:
            since = self._since
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
        window = _window(since, now)
        summary = (
            f"{acted} action(s), {errors} error(s) {window}" if led else f"this replica did not lead {window} (standby)"
        )
        return AlertEvent(AlertKind.DAILY_REPORT, Severity.INFO, now, f"daily/{identity}", summary, details)


def _window(since: datetime, now: datetime) -> str:
    """The report's window in words: "in the last day" for a day (to within ``DAY_TOLERANCE``, a report run late by
    a busy scheduler), its length otherwise, or its start when the wall clock has been stepped back behind that."""
    length = now - since
    if length < timedelta(0):
        return f"since {since:%Y-%m-%d %H:%M} UTC (the wall clock has been stepped back behind it since)"
    if abs(length - timedelta(days=1)) <= DAY_TOLERANCE:
        return "in the last day"
    return f"in the last {format_duration(length)}"


def _line(counts: Counter[str]) -> str:
    return ", ".join(f"{key}: {n}" for key, n in sorted(counts.items())) or "none"
