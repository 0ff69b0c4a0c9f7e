"""The replica's own alert when its leader ticks fail (``tick-failed`` on ``replica/<pod>``), and its end.

A leader tick that raises holds every pool until the next tick. The daemon tells it as ``tick-failed`` whatever
the error's class, which the summary and details name: a failed tick is no condition of a demand class's metrics or
of a pool, which the loop's tracker raises and ends on their own subjects under their own kinds (``missing-data``,
``actuator-failure``). Its end is told once, at the first tick that does not fail (as leader, or as a standby, whose
ticks hold no pool) once ``resolve_after`` (``alerts.resolve_after``) has passed since the last one that failed, as
a level condition's end is: ticks that fail now and then make one condition, told once while the notifier's window
lasts, not a raise and an end at each failure.

The open failure outlives the process the way the loop's open conditions do: a loop that keeps the planner memory
(``KeepsTickFailures``) saves it there, in the tracker's record, after each failed tick, and takes it out once its
end is told. A replica restarted after failing ticks (a crash, an OOM kill, a rollout) holds nothing of them: the
leader that next reads the memory, this one restarted or another, adopts the condition and tells its end
(``agent.conditions``), ``resolve_after`` after it adopted it at the earliest. A replica that stops leading with its
failure saved leaves the end to that leader, as a standby leaves every condition; one whose failure could not be
saved tells the end at its own standby ticks, as before.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from agent.planning.memory import Condition, OpenCondition
from models import AlertEvent, AlertKind, Severity
from models.durations import format_duration

SUMMARY = "tick failed, pools held until a tick succeeds"


@runtime_checkable
class KeepsTickFailures(Protocol):
    """A loop that keeps the open ``tick-failed`` condition with the open conditions of the planner memory it saves."""

    def keep_open(self, key: Condition, condition: OpenCondition, now: datetime) -> bool:
        """Save ``condition`` as open; True when the stored memory holds it (a leader that reads it tells its end)."""
        ...

    def keep_closed(self, key: Condition, now: datetime) -> None:
        """Take the condition out: its end is told."""
        ...


class TickFailures:
    """The failing ticks of the replica ``subject`` names (``replica/<pod>``): the alert of each, and their end."""

    def __init__(self, subject: str, resolve_after: timedelta) -> None:
        self.subject = subject
        self.resolve_after = resolve_after
        self._since: datetime | None = None  # the first failed tick since the end was last told
        self._last: datetime | None = None  # the last failed tick
        self._error = ""
        self.saved = False  # whether the stored planner memory holds the open failure (``KeepsTickFailures``)

    @property
    def key(self) -> Condition:
        return (AlertKind.TICK_FAILED, self.subject)

    def condition(self) -> OpenCondition | None:
        """The open failure as the planner memory keeps an open condition; None while none is open."""
        if self._since is None or self._last is None:
            return None
        return OpenCondition(self._since, self._last, Severity.WARNING, f"{SUMMARY}: {self._error}")

    def stand_by(self) -> bool:
        """A standby tick: a failure the stored memory holds is left to the leader that reads it, and forgotten
        here without its end (True); one it does not hold is kept, its end told here."""
        if not self.saved or self._since is None:
            return False
        self._since = self._last = None
        self.saved = False
        return True

    def failed(self, now: datetime, exc: Exception) -> AlertEvent:
        """The alert of a tick that failed at ``now`` with ``exc``."""
        self._error = f"{type(exc).__name__}: {exc}"
        if self._since is None:
            self._since = now
        self._last = now
        return AlertEvent(
            AlertKind.TICK_FAILED,
            Severity.WARNING,
            now,
            self.subject,
            f"{SUMMARY}: {self._error}",
            {"detail": self._error},
        )

    def ended(self, now: datetime) -> AlertEvent | None:
        """The end of the failures, told by a tick at ``now`` that did not fail; None while none is open, or the last
        failed less than ``resolve_after`` ago."""
        if self._since is None or self._last is None or now - self._last < self.resolve_after:
            return None
        since, last = self._since, self._last
        self._since = self._last = None
        self.saved = False
        return AlertEvent(
            AlertKind.TICK_FAILED,
            Severity.INFO,
            now,
            self.subject,
            f"Ticks no longer fail: none has since {_when(last)}; the first failed at {_when(since)}.",
            {
                "first failed": _when(since),
                "last failed": _when(last),
                "failing for": format_duration(last - since),
                "last error": self._error,
            },
            resolved=True,
        )


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
