"""The daemon's orderly stop: the lock on the agent loop (a tick holds it, and a refit while it copies the model or
swaps one in), the stop that starts no new tick or refit, and the handover of the lease once nothing acts any more.

On shutdown the tick in progress finishes (and a refit's model copy or swap, which hold ticks off); a fit beside the
ticks is abandoned: it writes nothing, its model is never swapped in, and its thread does not keep the process
alive, so the lease is handed over at once instead of after the fit. A tick that has not finished within the
shutdown wait keeps the lease from being handed over: it lapses instead.
"""

from __future__ import annotations

import logging
import threading

from agent.daemon.election import Elector
from agent.daemon.metrics import DaemonMetrics
from models.clock import Clock

# The daemon's jobs log under the one name of ``agent.daemon.service``, whichever of its modules runs them.
log = logging.getLogger("agent.daemon.service")


class OrderlyStop:
    """What the jobs hold and check: ``work``, the lock on the agent loop; ``stopping``, set once a stop is asked
    for; ``fit_or_stop``, notified when a fit beside the ticks ends and on a stop."""

    def __init__(self, elector: Elector, clock: Clock, metrics: DaemonMetrics) -> None:
        self._elector = elector
        self._clock = clock
        self._metrics = metrics
        self.work = threading.Lock()
        self.stopping = threading.Event()
        self.fit_or_stop = threading.Condition()

    def stop_working(self, timeout: float | None = None) -> bool:
        """Start no new tick or refit, abandon a refit's fit beside the ticks (it writes nothing and is never
        swapped in), and wait for the tick in progress to finish (or a refit's model copy or swap, which hold
        ticks off), while the election goes on renewing the lease: at most ``timeout`` seconds when given. False
        when one was still running then."""
        with self.fit_or_stop:
            self.stopping.set()
            self.fit_or_stop.notify_all()
        if not self.work.acquire(timeout=-1.0 if timeout is None else max(0.0, timeout)):
            return False
        self.work.release()
        return True

    def release(self) -> bool:
        """Hand the lease over; call only once ``stop_working`` returned True, so nothing acts after the handover: a
        standby takes an empty lease at once, and a tick still running could have a cloud write on its way (the
        runtime leaves the lease to lapse then). A tick or refit still holding the loop keeps the lease: False."""
        if not self.work.acquire(blocking=False):
            log.warning("the lease is not handed over: a tick (or a refit's model copy or swap) still runs; it lapses")
            return False
        try:
            released = self._elector.release(self._clock.now())
        finally:
            self.work.release()
        self._metrics.is_leader.set(0)
        self._metrics.forget_latest_tick()
        return released
