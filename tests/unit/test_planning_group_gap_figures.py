"""A demand group with a class lacking one figure tells what went into each of its figures: a class with a forecast
but no current value has its peak summed, one observed now but with no forecast has its value in "now", and only a
class with neither is told as not counted. The pool is held for the class either way, as before."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from agent.planning import PlanInput, PlannerMemory, plan_capacity
from agent.planning.groups import demand_groups
from config.schema import PlannerSettings
from models import DemandForecast, PoolDecision, PoolState, SkipReason
from tests.unit.test_planner import forecast, pool

NOW = datetime(2024, 1, 31, 14, tzinfo=UTC)
STEP = timedelta(minutes=5)
CLASSES = ("a", "b", "c", "x")
SHARED = pool("gpu", serves=CLASSES, price=29.36)
PEAKS = {"a": 120.0, "b": 64.0, "c": 0.0, "x": 40.0}
OBSERVED = {"a": 100.0, "b": 60.0, "c": 0.0, "x": 30.0}
GROUP = {"pool-group:gpu": forecast("pool-group:gpu", [150.0] * 4)}


def _decision(forecasts: dict[str, DemandForecast], observed: dict[str, float], held: str = "x") -> PoolDecision:
    since = tuple(NOW - timedelta(hours=1) for _ in range(20))
    plan = plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=[SHARED],
            states={"gpu": PoolState("gpu", NOW, 50, 50, idle_units=20, idle_since=since)},
            forecasts=forecasts,
            observed=observed,
            service_levels=dict.fromkeys(CLASSES, 0.9),
            settings=PlannerSettings(idle_hold_lead_times=0),
            memory=PlannerMemory(),
            budgets=[],
            groups=demand_groups(list(CLASSES), [SHARED]),
            forecast_step=STEP,
        )
    )
    [skip] = [s for s in plan.skips if s.reason is SkipReason.MISSING_DATA]
    assert skip.detail == f"no trustworthy demand for {held}; holding"  # the decision: held as before
    assert plan.decisions["gpu"].target_units == 50
    return plan.decisions["gpu"]


def _forecasts(without: tuple[str, ...] = ()) -> dict[str, DemandForecast]:
    return {name: forecast(name, [peak] * 4) for name, peak in PEAKS.items() if name not in without}


@pytest.mark.parametrize(
    ("forecasts", "observed", "told", "logged"),
    [
        pytest.param(
            _forecasts(),
            {**OBSERVED, "x": math.nan},
            "sum of the q0.9 peaks of a, b, c, x: 224, now 160, x: no current value, its q0.9 peak counted)",
            "peak=224:now=160:chips=224:peak_summed=a+b+c+x:no_now=x",
            id="a forecast, no current value",
        ),
        pytest.param(
            _forecasts(without=("x",)),
            OBSERVED,
            "sum of the q0.9 peaks of a, b, c: 184, now 190, x: no forecast, its 30 now counted)",
            "peak=184:now=190:chips=190:peak_summed=a+b+c:no_forecast=x",
            id="observed now, no forecast",
        ),
        pytest.param(
            _forecasts(without=("x",)),
            {**OBSERVED, "x": math.nan},
            "sum of the q0.9 peaks of a, b, c: 184, now 160, x without data, not counted)",
            "peak=184:now=160:chips=184:peak_summed=a+b+c:missing=x",
            id="neither",
        ),
        pytest.param(
            {**_forecasts(), **GROUP},
            {**OBSERVED, "x": math.nan},
            "q0.9 peak 150, now 160, x: no current value, counted in the group's peak)",
            "peak=150:now=160:chips=160:no_now=x",
            id="the group's own forecast, no current value",
        ),
        pytest.param(
            {**_forecasts(without=("x",)), **GROUP},
            OBSERVED,
            "q0.9 peak 150, now 190, x: no forecast of its own, its 30 now counted)",
            "peak=150:now=190:chips=190:no_forecast=x",
            id="the group's own forecast, no forecast of x",
        ),
    ],
)
def test_each_figure_of_the_group_says_what_went_into_it(
    forecasts: dict[str, DemandForecast], observed: dict[str, float], told: str, logged: str
) -> None:
    decision = _decision(forecasts, observed)
    why = decision.why()
    assert f"(pool-group:gpu: {told}" in why
    if "without data" not in told:
        assert "not counted" not in why
    assert decision.log_fields()["demand"] == f"pool-group:gpu:q0.9:{logged}"


@pytest.mark.parametrize(
    ("observed", "told", "logged"),
    [
        pytest.param(
            {**OBSERVED, "x": math.nan},
            "q0.9 peak unknown, now 160, x without data, not counted, a, b, c: no forecast, their 160 now counted)",
            "peak=unknown:now=160:chips=160:missing=x:no_forecast=a+b+c",
            id="x unobserved",
        ),
        pytest.param(
            OBSERVED,
            "q0.9 peak unknown, now 190, a, b, c, x: no forecast, their 190 now counted)",
            "peak=unknown:now=190:chips=190:no_forecast=a+b+c+x",
            id="every class observed",
        ),
    ],
)
def test_a_group_with_no_peak_counts_its_classes_only_in_now(
    observed: dict[str, float], told: str, logged: str
) -> None:
    """No forecast of the group nor of any class: there is no group's peak to count a class in."""
    decision = _decision({}, observed, held="a, b, c, x")
    why = decision.why()
    assert f"(pool-group:gpu: {told}" in why
    assert "group's peak" not in why
    assert "of their own" not in why and "of its own" not in why
    assert decision.log_fields()["demand"] == f"pool-group:gpu:q0.9:{logged}"
