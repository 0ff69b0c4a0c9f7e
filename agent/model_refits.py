"""Refits of the loop's model: one fitted apart from the model the ticks use (``agent.loop.Agent.stage_refit``),
and one made within a tick (``refit_in_tick``).

A refit in a tick that fails for a reason other than the forecaster's own refusal (a library's error in the fit,
memory) keeps the models fitted before, and when none was, holds every class with the reason, instead of failing the
tick (pools are still read, drains continued, budgets enforced).

The daemon refits beside its ticks: ``stage_refit`` reads the history while ticks go on (it reads the metric source
only, within its own deadline: half of ``forecast.refit_interval``), ``StagedRefit.take`` copies the model between two
ticks, the copy is fitted (``StagedRefit.fit``) while ticks go on with the model they have, and ``install`` swaps it
in between two ticks, so a tick never sees a model half fitted. A history read cut by its deadline fails the refit
(``RefitReadCut``, ``read_history``): a model fitted without the classes not read would forecast none of them. The
daemon's ticks refit only while no model has been fitted (``refit_in_ticks`` off): the scheduled refit is the only one
after that, so a tick never refits the live model while the scheduled refit fits its copy, and a refit that fails is
survived by the refit job alone, not retried in every tick after it. A tick's refit reads within the same deadline
as a refit beside the ticks: a Prometheus that answers a tick's short reads but not the range queries over
``forecast.history`` held the daemon's first tick, and every tick behind it, for each class's timeouts and retries
in turn; the read is now cut there and, with no model fitted yet, every class is held with the reason.
A class whose history a refit did not read keeps the model and calibration of the last fit that read it, for at
most ``forecast.history`` (the forecaster's ``keep_unread_for``): the log says how old they are, and the model age
the daemon exports (``StagedRefit.fitted_at``) is that of the oldest model kept; past the bound the forecaster
forgets them, and the class is forecast as a new one until a refit reads it.
Given a ``stand_in`` (a cheap model, the calibrated last value), the first ticks forecast with it and need not wait
for the configured model's first fit; the first staged refit swaps that in. While the configured model's fit fails,
each staged refit refits a copy of the stand-in on the same history instead (it is cheap) and swaps that in, the
configured model still pending, so the stand-in's calibration follows demand rather than staying the start-up one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pandas as pd

from agent.observation import with_group_series
from agent.planning.groups import DemandGroup
from agent.sources.base import read_deadline, read_time_left
from forecasting.base import Forecaster, KeepsUnreadSeries
from models import ForecastError, MetricsUnavailable
from models.durations import format_duration
from models.errors import RefitReadCut

log = logging.getLogger("agent.loop")  # the loop's logger, as before the split

Fetch = Callable[[datetime, datetime], tuple[pd.DataFrame, Mapping[str, MetricsUnavailable]]]


def read_history(
    fetch: Fetch, now: datetime, span: timedelta, within: timedelta, classes: int
) -> tuple[pd.DataFrame, Mapping[str, MetricsUnavailable]]:
    """The history window of ``span`` (``forecast.history``) ending at ``now``, read within ``within`` (half of
    ``forecast.refit_interval``), and why each class not read was not; ``RefitReadCut`` when the deadline cut the
    read (of ``classes`` classes in all)."""
    with read_deadline(within):
        history, unread = fetch(now - span, now)
        left = read_time_left()
    if unread and left is not None and left[0] <= 0:
        raise RefitReadCut.of(span, within, sorted(unread), classes)
    return history, unread


def tell_unread(
    unread: Mapping[str, MetricsUnavailable],
    model: Forecaster | None,
    now: datetime,
    before: Mapping[str, datetime] | None = None,
) -> None:
    """Log each class of ``unread`` once ``model`` was fitted at ``now`` without it: how old the model and
    calibration it keeps of the class are, or that they were forgotten (``before``: what ``model`` kept before the
    fit). None: the fit failed, and the models in use are kept whole."""
    through = read_through(model)
    newest = max(through.values()) if through else None
    for name, why in sorted(unread.items()):
        head = f"refit: the history of class {name} was not read ({why.reason}); "
        if through is None or newest is None or model is None:
            log.warning(head + "its model and calibration are kept from the last fit until a refit reads it")
        elif name in through:
            age = newest - through[name]
            log.warning(
                head + "its model and calibration are kept from the last fit that read it, %s ago (the refit of "
                "%s UTC), for at most forecast.history (%s) unless a refit reads it",
                format_duration(age),
                f"{now - age:%Y-%m-%d %H:%M}",
                format_duration(_keeps_for(model)),
            )
        elif before is not None and name in before:
            log.warning(
                head + "its model and calibration, from the refit of %s UTC, are forgotten: no refit has read it for "
                "longer than forecast.history (%s); it is forecast as a new class until a refit reads it",
                f"{now - (newest - before[name]):%Y-%m-%d %H:%M}",
                format_duration(_keeps_for(model)),
            )
        else:
            log.warning(head + "no fit has read it yet: it is forecast as a new class until a refit reads it")


def read_through(model: Forecaster | None) -> dict[str, datetime] | None:
    """Per series ``model`` keeps a model for, the end of the history of the newest fit given it; None for a
    forecaster that keeps nothing of a series between fits."""
    if not isinstance(model, KeepsUnreadSeries):
        return None
    return dict(model.read_through())


def oldest_fit(model: Forecaster, now: datetime) -> datetime:
    """When the oldest model ``model`` forecasts a series with was fitted, ``model`` last fitted at ``now``: ``now``
    unless it keeps a series' model from an earlier fit (that fit's time, on the forecaster's own record)."""
    through = read_through(model)
    if not through:
        return now
    return now - (max(through.values()) - min(through.values()))


def _keeps_for(model: Forecaster) -> timedelta:
    return model.keep_unread_for if isinstance(model, KeepsUnreadSeries) else timedelta(0)


@dataclass
class StagedRefit:
    """A refit fitted apart from the model ticks use; ``take`` and ``install`` run between ticks, ``fit`` may run
    beside them. ``taker`` copies the model to fit and, while the configured model is pending, the stand-in in use;
    ``installer`` swaps what was fitted in (the loop's)."""

    history: pd.DataFrame
    now: datetime
    groups: Sequence[DemandGroup]
    step: timedelta
    taker: Callable[[], tuple[Forecaster, Forecaster | None]]
    installer: Callable[[StagedRefit], None]
    model: Forecaster | None = None
    stand_in: Forecaster | None = None
    # the configured model's fit failure, when the stand-in was refitted in its place
    failure: Exception | None = None
    # the classes whose history read failed though the deadline had not passed: each keeps its model and calibration
    # from the last fit that read it, for at most forecast.history (the daemon counts each in
    # ``leadtime_errors_total``; ``fit`` logs how old what it keeps is)
    unread: Mapping[str, MetricsUnavailable] = field(default_factory=dict)
    # what the copies kept of each series before the fit (``read_through``): the model's, the stand-in's
    _before: tuple[Mapping[str, datetime] | None, Mapping[str, datetime] | None] = field(
        default=(None, None), init=False, repr=False
    )
    _oldest: datetime | None = field(default=None, init=False, repr=False)  # the oldest model fitted's time

    @property
    def fitted_at(self) -> datetime:
        """The end of the history the oldest model installed was fitted on: this refit's, unless it keeps a class's
        model from an earlier refit (its history not read since), whose age the daemon exports then."""
        return self.now if self._oldest is None else self._oldest

    @property
    def pending(self) -> bool:
        """Whether the stand-in forecasts in place of the configured model once this refit is installed."""
        return self.failure is not None

    def take(self) -> None:
        self.model, self.stand_in = self.taker()
        self._before = (read_through(self.model), read_through(self.stand_in))

    def fit(self) -> None:
        """Fit the copy; when the configured model's fit fails and a stand-in forecasts in its place, refit a copy
        of the stand-in on the same history (``failure`` then says why the configured model was not fitted). Each
        class not read is logged with the age of the model it keeps."""
        if self.model is None:
            raise RuntimeError("StagedRefit.fit before take: the model to fit was not copied")
        history = with_group_series(self.history, self.groups)
        try:
            try:
                self.model.fit(history, self.step)
            except Exception as exc:
                if self.stand_in is None:
                    raise
                self.stand_in.fit(history, self.step)
                self.failure = exc
        except BaseException:
            tell_unread(self.unread, None, self.now)  # nothing is swapped in: the models in use are kept whole
            raise
        fitted, before = self.model, self._before[0]
        if self.failure is not None and self.stand_in is not None:
            fitted, before = self.stand_in, self._before[1]
        self._oldest = oldest_fit(fitted, self.now)
        tell_unread(self.unread, fitted, self.now, before)

    def install(self) -> None:
        self.installer(self)


def refit_in_tick(
    refit: Callable[[datetime], None],
    now: datetime,
    fitted_at: datetime | None,
    names: Sequence[str],
    problems: dict[str, str],
) -> bool:
    """Refit within a tick; whether there is a model to forecast with (``fitted_at``: when the models in use were
    fitted, if any). The tick's read deadline is lifted: ``refit`` (``Agent.refit``) reads the history within a
    refit's own (``read_history``), as a refit beside the ticks does, since the tick's would cut classes off the
    model. A failure with no model fitted holds every class of ``names`` with its reason, in ``problems``; a read cut
    by its deadline (``RefitReadCut``) keeps the models fitted before, as it does beside the ticks."""
    try:
        with read_deadline(None):
            refit(now)
    except (ForecastError, MetricsUnavailable) as exc:
        problems.update({name: f"forecast failed: {exc}" for name in names if name not in problems})
        return False
    except RefitReadCut as exc:
        if fitted_at is not None:
            log.error("refit in the tick: %s (fitted at %s)", exc, fitted_at)
            return True
        log.error("refit in the tick: %s; no model has been fitted, so every class is held", exc)
        problems.update({name: f"forecast failed: {exc}" for name in names if name not in problems})
        return False
    except Exception as exc:  # any failure of a fit: the tick goes on without a new model
        if fitted_at is not None:
            log.exception("refit failed in the tick; forecasting with the models fitted at %s", fitted_at)
            return True
        log.exception("refit failed in the tick and no model has been fitted; every class is held")
        why = f"forecast failed: the models could not be fitted ({type(exc).__name__}: {exc})"
        problems.update({name: why for name in names if name not in problems})
        return False
    return True
