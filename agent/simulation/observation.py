"""What the agent-driven policies observe and forecast over a window: each tick's outlook, computed once per
policy and replayed by every planner setting tried on it. The agent starts afresh at the start and at
``restart_tick``, so the window's two parts can be observed at once, in two processes (``share_out``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from agent.loop import Agent
from agent.outlook import Outlook
from agent.simulation.assembly import policy_agent, policy_cluster
from agent.simulation.window import SimulationWindow
from agent.sources.trace import Trace
from config.schema import Settings
from forecasting.base import Forecaster
from models.clock import SimulatedClock

Progress = Callable[[int], None]
ObserveArgs = tuple[
    Settings,
    Trace,
    SimulationWindow,
    str,
    Sequence[float],
    Progress | None,
    Callable[[], Forecaster] | None,
    range | None,
]


LAST_VALUE = "calibrated last value"  # the forecaster decision changes are counted against
Job = tuple[str, range]  # a policy's outlooks (or ``LAST_VALUE``'s) over some ticks
# What observing a window costs, cheapest last: the configured models, the calibrated last value, bare persistence.
COST_RANK = {"forecast": 0, LAST_VALUE: 1, "reactive": 2}


def share_out(
    jobs: Sequence[Job], job_args: Callable[..., ObserveArgs], progress: Progress | None
) -> dict[Job, list[Outlook]]:
    """Every job's outlooks, computed in this process and in a second one at once, each taking the next job in
    order as it comes free: jobs differ in length (a part with more history fits longer), and a fixed split kept a
    core idle for 10 s of the demo. ``progress`` is called in this thread only: with this process's ticks as they
    go, and with the other's jobs (but ``LAST_VALUE``'s, which the bar does not count) once they have ended."""
    waiting = list(jobs)
    found: dict[Job, list[Outlook]] = {}
    lock = threading.Lock()
    failed: list[BaseException] = []
    pending = [0]  # ticks the other process observed, not yet reported

    def take() -> Job | None:
        with lock:
            return waiting.pop(0) if waiting and not failed else None

    def report(ticks: int) -> None:
        with lock:
            ticks, pending[0] = ticks + pending[0], 0
        if progress is not None and ticks:
            progress(ticks)

    def feed(pool: ProcessPoolExecutor) -> None:  # a thread: waits for the second process, which frees the GIL
        try:
            while (job := take()) is not None:
                found[job] = pool.submit(observe_window, *job_args(*job)).result()
                if job[0] != LAST_VALUE:
                    with lock:
                        pending[0] += len(job[1])
        except Exception as error:  # noqa: BLE001 - raised again in the calling thread once this one ends
            failed.append(error)

    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        feeder = threading.Thread(target=feed, args=(pool,), name="outlooks-feeder", daemon=True)
        feeder.start()
        try:
            while (job := take()) is not None:
                found[job] = observe_window(*job_args(*job, report))
        except BaseException:
            with lock:
                waiting.clear()
            raise
        finally:
            feeder.join()
    report(0)
    if failed:
        raise failed[0]
    if len(found) < len(jobs):  # the feeder thread died of something no ``except Exception`` catches
        raise RuntimeError(f"outlooks not computed for {[job for job in jobs if job not in found]}")
    return found


def restart_tick(settings: Settings, window: SimulationWindow) -> int:
    """The tick at which every agent-driven policy's agent starts afresh (0: never): the point of the configured
    retrain schedule (counted from the window's start) nearest the window's middle.

    A fresh agent fits, trains every model and selects at its first tick, as an agent that ran from the start
    does there on its own schedule, so the outlooks are that agent's; unless a data gap has moved its schedule
    (refits resume one step after a gap ends: on the bundled window by one step), and then the restart adds one
    retrain, as a rollout of the daemon would. The window's two parts can then be observed at the same time, in
    two processes, and the outlooks never depend on how many there are."""
    every = max(1, round(settings.forecast.retrain_interval / window.step))
    steps = len(window.index)
    tick = round(steps / 2 / every) * every
    return tick if 0 < tick < steps else 0


def restart_parts(settings: Settings, window: SimulationWindow) -> list[range]:
    """The window's ticks in the parts a fresh agent observes (``restart_tick``)."""
    steps, tick = len(window.index), restart_tick(settings, window)
    return [range(0, tick), range(tick, steps)] if tick else [range(steps)]


def observe_window(
    settings: Settings,
    trace: Trace,
    window: SimulationWindow,
    policy: str,
    extra_quantiles: Sequence[float] = (),
    progress: Progress | None = None,
    forecaster: Callable[[], Forecaster] | None = None,
    ticks: range | None = None,
) -> list[Outlook]:
    """What the ``policy``'s agent observes and forecasts at every step of the window, or at ``ticks`` (with a
    forecaster ``forecaster()`` makes instead of the configured one, when given). The agent starts afresh at the
    first tick and at ``restart_tick``."""
    ticks = range(len(window.index)) if ticks is None else ticks
    restart = restart_tick(settings, window)
    seen: list[Outlook] = []
    clock: SimulatedClock | None = None
    agent: Agent | None = None
    for t in ticks:
        if agent is None or clock is None or t == restart:
            cluster, clock = policy_cluster(settings, window, policy)
            made = forecaster() if forecaster is not None else None
            agent = policy_agent(policy, settings, trace, window, cluster, None, extra_quantiles, made)
        now = window.index[t].to_pydatetime()
        clock.set(now)
        seen.append(agent.observe(now))
        if progress is not None and len(seen) % 64 == 0:
            progress(64)
    if progress is not None:
        progress(len(seen) % 64)
    return seen
