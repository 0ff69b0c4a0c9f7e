"""Refits of the loop's model: one fitted apart from the model the ticks use (``agent.loop.Agent.stage_refit``),
and one made within a tick (``refit_in_tick``).

A refit in a tick that fails for a reason other than the forecaster's own refusal (a library's error in the fit,
memory) keeps the models fitted before, and when none was, holds every class with the reason, instead of failing the
tick (pools are still read, drains continued, budgets enforced).

The daemon refits beside its ticks: ``stage_refit`` reads the history while ticks go on (it reads the metric source
only, within its own deadline: half of ``forecast.refit_interval``), ``StagedRefit.take`` copies the model between two
ticks, the copy is fitted (``StagedRefit.fit``) while ticks go on with the model they have, and ``install`` swaps it
in between two ticks, so a tick never sees a model half fitted. A history read cut by its deadline fails the refit
(``RefitReadCut``): a model fitted without the classes not read would forecast none of them. The daemon's ticks
refit only while no model has been fitted (``refit_in_ticks`` off): the scheduled refit is the only one after that,
so a tick never refits the live model while the scheduled refit fits its copy, and a refit that fails is survived
by the refit job alone, not retried in every tick after it.
Given a ``stand_in`` (a cheap model, the calibrated last value), the first ticks forecast with it and need not wait
for the configured model's first fit; the first staged refit swaps that in. While the configured model's fit fails,
each staged refit refits a copy of the stand-in on the same history instead (it is cheap) and swaps that in, the
configured model still pending, so the stand-in's calibration follows demand rather than staying the start-up one.

A tick's refit (the daemon's first ticks, until a model is fitted) reads the history within a deadline of its own,
the tick's read deadline (``loop.read_deadline``, half a tick unless set) again, after the tick's demand reads. With
no deadline, a Prometheus that hangs on the history's range queries held the first tick for every class's timeouts
and retries (91.5 s a class with the defaults), with no pool read, no budget enforced and no alert; seven classes
outlast liveness's default bound, and the kubelet restarted the replica into the same first tick. A first tick now
reads for about twice the read deadline (a tick with the defaults; as in any tick's reads, a request under way when
a deadline passes may run out its own timeout), well under liveness's bound (ten ticks, at least 10m, unless set).
Where no model has been fitted yet and the deadline cut the read, the classes read are fitted and forecast, and each
class whose history was not read is held for the tick, named with why (``held_unread``), as missing data; the fit is
not marked done. The history read is kept until it is: the next tick reads only the classes not read yet, the ones
held first, and fits on what all the ticks read (``joined_history``), so a history too slow to read whole within one
deadline is read over a few ticks instead of the same classes being read, and the rest held, in every tick (four
classes of 1.5 s each and a 2-second deadline: three of them were held in every tick, and the refit beside the
ticks, cut at 5 s, never fitted; now every class is fitted by the fourth tick). The kept history is dropped once the
fit is done. A class whose read failed though the deadline had not passed (an error answer) is not held: the fit
goes on without it and is marked done, as before the deadline and as a refit beside the ticks does
(``kept_unread``); it is forecast by the model it has, the stand-in's bare last value if never fitted. Where a model
was fitted before, the refit follows the rule of the refit beside the ticks: a read cut by its deadline fails the
refit (``RefitReadCut``; the models in use are kept and the next tick refits), and a class not read though the
deadline had not passed keeps its model (``kept_unread``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pandas as pd

from agent.observation import with_group_series
from agent.planning.groups import DemandGroup
from forecasting.base import Forecaster
from models import ForecastError, MetricsUnavailable
from models.durations import format_duration
from models.errors import RefitReadCut

log = logging.getLogger("agent.loop")  # the loop's logger, as before the split


def kept_unread(unread: Mapping[str, MetricsUnavailable]) -> Mapping[str, MetricsUnavailable]:
    """Log each class a refit's history read did not read though its deadline had not passed, and return them: the
    refit goes on without them, and each keeps its model and calibration from the last fit."""
    for name, why in sorted(unread.items()):
        log.warning(
            "refit: the history of class %s was not read (%s); its model and calibration are kept from the last fit "
            "until a refit reads it",
            name,
            why.reason,
        )
    return unread


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
    # from the last fit (the daemon counts each in ``leadtime_errors_total``)
    unread: Mapping[str, MetricsUnavailable] = field(default_factory=dict)

    @property
    def fitted_at(self) -> datetime:
        """The end of the history the model installed was fitted on."""
        return self.now

    @property
    def pending(self) -> bool:
        """Whether the stand-in forecasts in place of the configured model once this refit is installed."""
        return self.failure is not None

    def take(self) -> None:
        self.model, self.stand_in = self.taker()

    def fit(self) -> None:
        """Fit the copy; when the configured model's fit fails and a stand-in forecasts in its place, refit a copy
        of the stand-in on the same history (``failure`` then says why the configured model was not fitted)."""
        if self.model is None:
            raise RuntimeError("StagedRefit.fit before take: the model to fit was not copied")
        history = with_group_series(self.history, self.groups)
        try:
            self.model.fit(history, self.step)
        except Exception as exc:
            if self.stand_in is None:
                raise
            self.stand_in.fit(history, self.step)
            self.failure = exc

    def install(self) -> None:
        self.installer(self)


def held_unread(unread: Mapping[str, MetricsUnavailable], within: timedelta) -> dict[str, str]:
    """Log each class a tick's first fit did without, its history not read before the deadline passed, and return
    why each is held: no model has been fitted for it, and one never fitted would forecast it as its bare last
    value, without spread."""
    held = {}
    for name, why in sorted(unread.items()):
        log.warning(
            "refit in the tick: the history of class %s was not read (%s); it is held until a tick reads it",
            name,
            why.reason,
        )
        held[name] = f"history not read within {format_duration(within)} (loop.read_deadline): {why.reason}"
    return held


def joined_history(kept: pd.DataFrame, read: pd.DataFrame) -> pd.DataFrame:
    """The history a tick's first fit kept from the ticks before, with the classes this tick read (an empty frame
    left out, so the columns keep their types)."""
    frames = [f for f in (kept, read) if not f.empty]
    if len(frames) < 2:
        return frames[0] if frames else kept
    return pd.concat(frames, ignore_index=True)


def tick_read_cut(history: timedelta, within: timedelta, unread: Sequence[str], classes: int) -> RefitReadCut:
    """A tick's refit whose history read its deadline cut, where models were fitted before: they are kept."""
    listed = ", ".join(unread[:5]) + (", ..." if len(unread) > 5 else "")
    return RefitReadCut(
        f"the refit's history read in the tick (forecast.history {format_duration(history)}) did not finish within "
        f"{format_duration(within)} (loop.read_deadline): {len(unread)} of {classes} classes not read ({listed}); "
        "the models in use are kept and the next tick refits"
    )


def refit_in_tick(
    refit: Callable[[datetime], Mapping[str, str] | None],
    now: datetime,
    fitted_at: datetime | None,
    names: Sequence[str],
    problems: dict[str, str],
) -> bool:
    """Refit within a tick; whether there is a model to forecast with (``fitted_at``: when the models in use were
    fitted, if any). ``refit`` returns the classes it fitted no model for, each with why: they are held, in
    ``problems`` (the loop's ``_refit_in_tick``, whose history read has a deadline). A failure with no model fitted
    holds every class of ``names`` with its reason, in ``problems``."""
    try:
        held = refit(now) or {}
    except (ForecastError, MetricsUnavailable) as exc:
        problems.update({name: f"forecast failed: {exc}" for name in names if name not in problems})
        return False
    except RefitReadCut as exc:  # raised only with models fitted before: they forecast on
        log.warning("refit in the tick: %s", exc)
        return True
    except Exception as exc:  # any failure of a fit: the tick goes on without a new model
        if fitted_at is not None:
            log.exception("refit failed in the tick; forecasting with the models fitted at %s", fitted_at)
            return True
        log.exception("refit failed in the tick and no model has been fitted; every class is held")
        why = f"forecast failed: the models could not be fitted ({type(exc).__name__}: {exc})"
        problems.update({name: why for name in names if name not in problems})
        return False
    problems.update({name: why for name, why in held.items() if name not in problems})
    return not held or any(name not in held for name in names)
