"""Refits of the loop's model: one fitted apart from the model the ticks use (``agent.loop.Agent.stage_refit``),
and one made within a tick (``refit_in_tick``).

A refit in a tick that fails for a reason other than the forecaster's own refusal (a library's error in the fit,
memory) keeps the models fitted before, and when none was, holds every class with the reason, instead of failing the
tick (pools are still read, drains continued, budgets enforced).

The daemon refits beside its ticks: ``stage_refit`` reads the history and copies the model, the copy is fitted
(``StagedRefit.fit``) while ticks go on with the model they have, and ``install`` swaps it in between two ticks, so a
tick never sees a model half fitted. Its ticks then refit only while no model has been fitted (``refit_in_ticks``
off): the scheduled refit is the only one after that, so a tick never refits the live model while the scheduled
refit fits its copy, and a refit that fails is survived by the refit job alone, not retried in every tick after it.
Given a ``stand_in`` (a cheap model, the calibrated last value), the first ticks forecast with it and need not wait
for the configured model's first fit; the first staged refit swaps that in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd

from agent.observation import with_group_series
from agent.planning.groups import DemandGroup
from agent.sources.base import read_deadline
from forecasting.base import Forecaster
from models import ForecastError, MetricsUnavailable

log = logging.getLogger("agent.loop")  # the loop's logger, as before the split


@dataclass
class StagedRefit:
    """A refit fitted apart from the model ticks use; ``fit`` may run beside ticks, ``install`` between them.
    ``installer`` swaps the fitted ``model`` in (the loop's)."""

    model: Forecaster
    history: pd.DataFrame
    now: datetime
    groups: Sequence[DemandGroup]
    step: timedelta
    installer: Callable[[StagedRefit], None]

    def fit(self) -> None:
        self.model.fit(with_group_series(self.history, self.groups), self.step)

    def install(self) -> None:
        self.installer(self)


def refit_in_tick(
    refit: Callable[[datetime], None],
    now: datetime,
    fitted_at: datetime | None,
    names: Sequence[str],
    problems: dict[str, str],
) -> bool:
    """Refit within a tick, the history read whole (or the model would lack the classes a deadline cut off); whether
    there is a model to forecast with (``fitted_at``: when the models in use were fitted, if any). A failure with no
    model fitted holds every class of ``names`` with its reason, in ``problems``."""
    try:
        with read_deadline(None):
            refit(now)
    except (ForecastError, MetricsUnavailable) as exc:
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
