"""Steps of the wall clock, told apart from the time that passes: the offset of the wall clock from the monotonic one
moves only when the wall clock is set (NTP stepping it, a VM resumed with a wrong clock), never as time passes (NTP
slewing moves it by half a millisecond a second at most).

APScheduler 3 runs a job once ``datetime.now()`` reaches the job's next run time: after a step back every interval
job waits for the step's length (an hour back: no election, no tick and no refit for an hour), and after a step
forward every job is overdue at once. The daemon's runtime (``agent.daemon.runtime``) keeps its interval jobs on the
monotonic clock with this watch: a thread reads the offset every ``every`` seconds and hands each step larger than
``STEP_TOLERANCE`` to ``on_step``, which reschedules the jobs by it and wakes the scheduler.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta

from models.clock import Clock

log = logging.getLogger(__name__)

# A move of the offset larger than this is a step. Smaller steps hold the jobs that long at most.
STEP_TOLERANCE = timedelta(seconds=0.1)
# A reading whose two monotonic reads, either side of the wall clock's, are further apart than this was interrupted
# (the thread was descheduled in between) and says nothing precise: it is taken again at the next poll.
READING_BOUND = 0.01


class WallClockWatch:
    """Watches ``clock``'s wall time against its monotonic time; ``on_step`` gets each step (positive: forward)."""

    def __init__(
        self,
        clock: Clock,
        on_step: Callable[[timedelta], None],
        every: float,
        tolerance: timedelta = STEP_TOLERANCE,
    ) -> None:
        self._clock = clock
        self._on_step = on_step
        self._every = every
        self._tolerance = tolerance
        self._offset: timedelta | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> timedelta | None:
        """Read the offset once: how far the wall clock stepped since the previous reading, when further than the
        tolerance; None otherwise (or when the reading was interrupted, or is the first)."""
        before = self._clock.monotonic()
        wall = self._clock.now()
        after = self._clock.monotonic()
        if after - before > READING_BOUND:
            return None
        offset = wall.timestamp() - (before + after) / 2
        previous, self._offset = self._offset, timedelta(seconds=offset)
        if previous is None:
            return None
        step = self._offset - previous
        return step if abs(step) > self._tolerance else None

    def start(self) -> None:
        self.check()
        self._thread = threading.Thread(target=self._run, name="leadtime-clock-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            step = self.check()
            if step is None:
                continue
            try:
                self._on_step(step)
            except Exception:  # the watch must outlive a failed reschedule: the next step is handled again
                log.exception("rescheduling after a wall-clock step failed")
