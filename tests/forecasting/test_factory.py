"""The configured forecaster: every name the schema allows builds, ``naive`` is the calibrated last value and
``persistence`` bare persistence."""

from __future__ import annotations

from datetime import timedelta
from typing import get_args

import pytest
from pydantic import ValidationError

from config.schema import ForecastSettings, ModelName
from forecasting.calibrated import CalibratedForecaster
from forecasting.factory import build_forecaster
from forecasting.last_value import LastValueForecaster, PersistenceForecaster
from forecasting.selection import AutoForecaster

NAMES: tuple[ModelName, ...] = get_args(ModelName)


def test_the_schema_allows_exactly_the_model_names() -> None:
    assert get_args(ForecastSettings.model_fields["model"].annotation) == NAMES


@pytest.mark.filterwarnings("ignore:forecast.model. 'naive' is now:FutureWarning")
@pytest.mark.parametrize("name", NAMES)
def test_every_configurable_model_builds_under_its_own_name(name: ModelName) -> None:
    model = build_forecaster(ForecastSettings(model=name))
    assert model.name == name
    assert model.min_history_steps >= 1


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("persistence", PersistenceForecaster),
        ("naive", CalibratedForecaster),
        ("last-value", LastValueForecaster),
        ("auto", AutoForecaster),
        ("lightgbm", CalibratedForecaster),
    ],
)
@pytest.mark.filterwarnings("ignore:forecast.model. 'naive' is now:FutureWarning")
def test_kinds(name: ModelName, kind: type) -> None:
    assert isinstance(build_forecaster(ForecastSettings(model=name)), kind)


def test_lightgbm_trains_to_the_end_alone_and_holds_out_as_a_candidate_of_auto() -> None:
    alone = build_forecaster(ForecastSettings(model="lightgbm"))
    assert isinstance(alone, CalibratedForecaster)
    assert (alone.hold_out, alone.offset_bases) == (False, False)
    auto = build_forecaster(ForecastSettings(model="auto"))
    assert isinstance(auto, AutoForecaster)
    assert (auto.candidates["lightgbm"].hold_out, auto.candidates["lightgbm"].offset_bases) == (True, False)
    assert all(c.hold_out and c.offset_bases for n, c in auto.candidates.items() if n not in ("lightgbm", "naive"))
    # the last value learns nothing: all its residuals are out of sample, none needs holding out
    assert (auto.candidates["naive"].hold_out, auto.candidates["naive"].offset_bases) == (False, True)


def test_settings_reach_the_models() -> None:
    settings = ForecastSettings(model="auto", quantiles=(0.5, 0.8), retrain_interval=timedelta(hours=6))
    model = build_forecaster(settings)
    assert isinstance(model, AutoForecaster)
    assert model.quantiles == (0.5, 0.8)
    assert all(c.retrain_interval == timedelta(hours=6) for c in model.candidates.values() if c.name != "naive")


def test_unknown_model_is_a_configuration_error() -> None:
    with pytest.raises(ValidationError):
        ForecastSettings(model="prophet")  # type: ignore[arg-type]
