"""Rules that relate the daemon's times to one another: each interval, window and bound measured against the tick
(``loop.tick_interval``) or the forecast step, one problem per key, with the key path. Part of ``config.rules``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from config.schema import Settings
from models import ConfigProblem
from models.durations import format_duration


def forecast_interval_rules(settings: Settings) -> Iterator[ConfigProblem]:
    """Refits, retrains and reselections run at most once a tick: a shorter interval would have the scheduler
    run refits back to back, or say that models are retrained more often than they can be."""
    tick = settings.loop.tick_interval
    for key in ("refit_interval", "retrain_interval", "reselect_interval"):
        interval = getattr(settings.forecast, key)
        if interval < tick:
            yield ConfigProblem(
                f"forecast.{key}",
                f"must be at least one tick (loop.tick_interval, {format_duration(tick)}), got "
                f"{format_duration(interval)}",
            )


def alert_rules(settings: Settings) -> Iterator[ConfigProblem]:
    """An alert still present at the next tick is a repeat only within the de-duplication window: a window no
    longer than a tick would post every alert again at every tick."""
    tick, window = settings.loop.tick_interval, settings.alerts.dedup_window
    if window <= tick:
        yield ConfigProblem(
            "alerts.dedup_window",
            f"must be longer than one tick (loop.tick_interval, {format_duration(tick)}), got "
            f"{_shown(window)}: an alert that still holds at the next tick would be sent again at every tick",
        )


def readiness_rules(settings: Settings) -> Iterator[ConfigProblem]:
    """/readyz fails once the last successful tick is older than the bound. Just before a tick ends, the last
    success is a whole interval old, more when the tick ends later in its slot than the one before: a bound no
    longer than a tick fails the probe between ticks of a replica that has never missed one."""
    tick, bound = settings.loop.tick_interval, settings.daemon.endpoints.ready_max_tick_age
    if bound is not None and bound <= tick:
        yield ConfigProblem(
            "daemon.endpoints.ready_max_tick_age",
            f"must be longer than one tick (loop.tick_interval, {format_duration(tick)}), got {_shown(bound)}: "
            "/readyz would fail between ticks of a replica that misses none; unset, it is three ticks",
        )


def liveness_rules(settings: Settings) -> Iterator[ConfigProblem]:
    """/healthz fails while a tick has run longer than the bound, and the kubelet restarts the replica. A tick is
    given half its interval for reading demand alone, then plans and sends its cloud writes: a bound no longer than a
    tick restarts a replica whose tick is slow but not stuck."""
    tick, bound = settings.loop.tick_interval, settings.daemon.endpoints.live_max_tick_duration
    if bound is not None and bound <= tick:
        yield ConfigProblem(
            "daemon.endpoints.live_max_tick_duration",
            f"must be longer than one tick (loop.tick_interval, {format_duration(tick)}), got {_shown(bound)}: a "
            "tick's demand reads alone may take loop.read_deadline (half a tick unless set), so /healthz would fail, "
            "and the kubelet restart, a "
            "replica whose tick is slow but not stuck; unset, it is ten ticks, at least 10m",
        )


def read_deadline_rules(settings: Settings) -> Iterator[ConfigProblem]:
    """A tick reads within ``loop.read_deadline`` and then plans and acts: a deadline of a whole tick or more leaves
    it no time to, and every tick would run into the next."""
    tick, deadline = settings.loop.tick_interval, settings.loop.read_deadline
    if deadline is not None and deadline >= tick:
        yield ConfigProblem(
            "loop.read_deadline",
            f"must be shorter than one tick (loop.tick_interval, {format_duration(tick)}), got {_shown(deadline)}: "
            "the tick plans, enforces budgets and alerts after its reads; unset, it is half a tick",
        )


def prometheus_staleness_rules(settings: Settings) -> Iterator[ConfigProblem]:
    """Demand is read on the forecast step grid, whose newest step starts up to one step before the read: a
    staleness limit below a step reads a series that Prometheus answers on every step as stale for part of each."""
    if settings.prometheus is None:
        return
    step, limit = settings.forecast.step, settings.prometheus.max_staleness
    if limit < step:
        yield ConfigProblem(
            "prometheus.max_staleness",
            f"must be at least one forecast step (forecast.step, {format_duration(step)}), got {_shown(limit)}: the "
            "newest step of the grid demand is read on can be a whole step old, so a series Prometheus answers on "
            "every step would read as stale, its class unavailable, for part of every step",
        )


def _shown(delta: timedelta) -> str:
    """A duration as written in a file; a fraction of a second in milliseconds (``format_duration`` rounds it)."""
    return (
        f"{delta.total_seconds() * 1000:g}ms" if timedelta(0) < delta < timedelta(seconds=1) else format_duration(delta)
    )
