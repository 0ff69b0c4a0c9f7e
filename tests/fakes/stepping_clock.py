"""A clock whose wall time can be stepped (as NTP or a resumed VM steps it) apart from its monotonic time, for the
tests that check what a wall-clock step must not stretch or cut short."""

from __future__ import annotations

from datetime import datetime, timedelta


class SteppingClock:
    """Wall time that can be stepped apart from the monotonic time, which only runs."""

    def __init__(self, start: datetime) -> None:
        self.wall = start
        self.mono = 1000.0

    def now(self) -> datetime:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def run(self, by: timedelta) -> None:
        """Time passes: both clocks move on by ``by``."""
        self.wall += by
        self.mono += by.total_seconds()

    def step(self, by: timedelta) -> None:
        """The wall clock alone is set ``by`` forward (or back): no time passes."""
        self.wall += by
