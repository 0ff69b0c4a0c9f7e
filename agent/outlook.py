"""What one tick knows before it decides (``Outlook``): the on-prem pools' capacity now, the demand observed and
forecast per class, and why some classes have neither; and the step that reads demand and forecasts it
(``observe_and_forecast``).

The loop (``agent.loop.Agent.observe``) reads the on-prem capacity first, within its own share of the read deadline
(``ONPREM_READ_SHARE``), then demand within the rest. A class whose demand cannot be read, is stale or implausible,
or cannot be forecast is named in ``problems`` with its reason, never read as zero: the planner holds its pools.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.demand_reads import demand_now, fetch_demand, with_group_demand
from agent.observation import forecasts_from_frame, latest_observations, with_group_series
from agent.onprem_capacity import OnPremReading
from agent.planning.groups import DemandGroup
from agent.sources.base import MetricSource
from forecasting.base import Forecaster
from models import DemandClass, DemandForecast, ForecastError, MetricsUnavailable

# The share of a tick the on-prem capacity queries are read within, at its start (6 s of a 1-minute tick): one
# instant query per on-prem pool, light beside the demand reads, which have the rest of the read deadline.
ONPREM_READ_SHARE = 0.1


@dataclass(frozen=True)
class Outlook:
    """What one tick knows before it decides: observations, forecasts and why some classes have neither, and the
    on-prem pools' capacity now (``agent.onprem_capacity``).

    It depends only on the metrics, never on what the agent did, so a simulation can compute it once per tick
    and replay it for many planner settings.
    """

    observed: dict[str, float]
    forecasts: dict[str, DemandForecast]
    problems: dict[str, str]
    onprem: OnPremReading = field(default_factory=OnPremReading)


def observe_and_forecast(
    now: datetime,
    problems: dict[str, str],
    *,
    source: MetricSource,
    forecaster: Forecaster,
    classes: Sequence[DemandClass],
    groups: Sequence[DemandGroup],
    step: timedelta,
    horizon: int,
    levels: Sequence[float],
    max_staleness: timedelta,
    refit_if_due: Callable[[datetime, Sequence[str], dict[str, str]], bool],
) -> tuple[dict[str, float], dict[str, DemandForecast]]:
    """The demand of each class observed at ``now`` and its forecast over ``horizon`` steps at the quantiles
    ``levels``, the classes without either named in ``problems``. ``refit_if_due`` refits the model first when due
    and says whether there is one to forecast with (the loop's ``_refit_if_due``)."""
    names = [c.name for c in classes]
    recent_steps = max(forecaster.min_history_steps, 1) + max(1, math.ceil(max_staleness / step))
    try:
        recent, unavailable = fetch_demand(source, classes, now - recent_steps * step, now, step)
    except MetricsUnavailable as exc:
        problems.update({name: str(exc) for name in names})
        return {}, {}
    problems.update({name: str(exc) for name, exc in unavailable.items()})
    observable = [name for name in names if name not in unavailable]
    now_read, malformed = demand_now(source, classes, observable, now)
    problems.update({name: str(exc) for name, exc in malformed.items()})
    observable = [name for name in observable if name not in malformed]
    observed, missing = latest_observations(recent, observable, now, step, max_staleness, now_read)
    problems.update(missing)
    forecasts: dict[str, DemandForecast] = {}
    if observed and refit_if_due(now, names, problems):
        try:
            frame = forecaster.predict(with_group_series(recent, groups), horizon, levels)
            forecasts, bad = forecasts_from_frame(frame, now, step, levels, with_group_demand(observed, groups))
            problems.update({k: v for k, v in bad.items() if k not in problems})
        except (ForecastError, MetricsUnavailable) as exc:
            problems.update({name: f"forecast failed: {exc}" for name in names if name not in problems})
    aggregates = {g.name for g in groups if g.is_aggregate}
    forecasts = {k: v for k, v in forecasts.items() if k in observed or k in aggregates}
    for name in aggregates:
        problems.pop(name, None)
    return observed, forecasts
