"""Which model forecast each class at its service level over a simulated window, and the report's table of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.outlook import Outlook
from agent.report.simulation import _forecast_models
from agent.simulation.forecast_models import forecast_models
from forecasting.selection import _describe, model_at_level
from models.forecast import DemandForecast

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _outlook(models: dict[str, tuple[str, str]]) -> Outlook:
    forecasts = {
        name: DemandForecast(name, NOW, timedelta(minutes=5), {0.5: (1.0,), 0.9: (1.0,)}, 1.0, model, note)
        for name, (model, note) in models.items()
    }
    return Outlook(observed=dict.fromkeys(models, 1.0), forecasts=forecasts, problems={})


def test_a_levels_model_is_read_from_the_description_auto_writes() -> None:
    description = _describe(["naive", "lightgbm", "lightgbm", "naive"], [0.5, 0.9, 0.95, 0.999])
    assert description == "naive (q0.5, q0.999), lightgbm (q0.9, q0.95)"
    assert [model_at_level(description, q) for q in (0.5, 0.9, 0.95, 0.999)] == [
        "naive",
        "lightgbm",
        "lightgbm",
        "naive",
    ]
    assert model_at_level("ets+naive", 0.9) == "ets+naive"  # one model (here a combination) for every level
    assert model_at_level(description, 0.7) == description  # a level it does not list: said as it is


def test_each_class_counts_the_ticks_each_model_forecast_its_level_and_keeps_the_newest_note() -> None:
    outlooks = [
        _outlook({"a": ("naive", "auto: selected naive (first)"), "b": ("ets", "auto: selected ets")}),
        _outlook({"a": ("naive (q0.5), lightgbm (q0.9)", "auto: selected naive (second)")}),  # b has no forecast
        _outlook({"a": ("naive (q0.9), lightgbm (q0.5)", "auto: selected naive (third)"), "b": ("ets", "")}),
    ]
    uses = forecast_models(outlooks, {"a": 0.9, "b": 0.9, "c": 0.5})
    assert uses["a"].summary() == {
        "service_level": 0.9,
        "ticks": 3,
        "models": {"naive": pytest.approx(2 / 3), "lightgbm": pytest.approx(1 / 3)},
        "note": "auto: selected naive (third)",
    }
    assert (uses["b"].ticks, dict(uses["b"].by_model), uses["b"].note) == (2, {"ets": 2}, "")
    assert uses["c"].summary()["models"] == {} and uses["c"].ticks == 0


def test_the_report_table_lists_the_shares_and_escapes_the_note() -> None:
    uses = forecast_models(
        [_outlook({"x": ("lightgbm", "auto: <b>why</b>")}), _outlook({"x": ("naive", "auto: <b>why</b>")})],
        {"x": 0.9},
    )
    page = _forecast_models({name: use.summary() for name, use in uses.items()})
    assert "<td class='text'>lightgbm 50%, naive 50%</td>" in page
    assert "auto: &lt;b&gt;why&lt;/b&gt;" in page and "<b>why</b>" not in page
    assert _forecast_models(None) == ""


def test_a_service_level_between_the_forecasts_levels_is_read_at_the_level_the_planner_uses() -> None:
    # Planned at 0.85, the planner reads the forecast's 0.9 quantile (the nearest at or above): lightgbm's here.
    uses = forecast_models([_outlook({"a": ("naive (q0.5), lightgbm (q0.9)", "")})], {"a": 0.85})
    assert dict(uses["a"].by_model) == {"lightgbm": 1}
