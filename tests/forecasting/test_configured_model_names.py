"""One name, one model: every model name a report, a note, the daemon's log or ``leadtime backtest`` can show,
written as ``forecast.model`` in a configuration, builds the forecaster of that name. ``naive`` is the calibrated
last value (a band from its recent errors), the model ``auto`` reports choosing; ``persistence`` is the bare last
value. A configuration that says ``naive`` is told once, at load, that its meaning changed and how to keep the old
one."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import get_args

import pytest

from config import load_settings
from config.schema import ModelName, Settings
from forecasting.factory import build_forecaster
from forecasting.registry import AUTO_CANDIDATES, AUTO_COMBINATIONS, AUTO_POOLED, model_names
from tests.forecasting.conftest import DAY, STEP, bursty, long_frame

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "helios-earth.yaml"
MEANING_CHANGED = (
    "forecast.model: 'naive' is now the calibrated last value (the model the reports and backtest call naive: the "
    "newest value with a band from its recent errors), no longer bare persistence; to keep every quantile at the "
    "newest value, write 'persistence'"
)


def _configured(tmp_path: Path, name: str) -> tuple[Settings, list[str]]:
    """The example configuration with ``forecast.model: name``, loaded as a person's file is, and the warnings."""
    text = EXAMPLE.read_text(encoding="utf-8")
    assert text.count("\n  model: auto\n") == 1
    config = tmp_path / "configured.yaml"
    config.write_text(text.replace("\n  model: auto\n", f"\n  model: {name}\n"), encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = load_settings(config)
    return settings, [str(w.message) for w in caught]


def test_every_name_backtest_auto_and_the_reports_use_is_a_configurable_model() -> None:
    shown = set(AUTO_CANDIDATES) | {part for parts in AUTO_COMBINATIONS for part in parts} | set(AUTO_POOLED)
    assert shown <= set(model_names())
    assert set(get_args(ModelName)) == set(model_names())


@pytest.mark.parametrize("name", model_names())
def test_a_configured_name_builds_the_model_of_that_name(tmp_path: Path, name: str) -> None:
    settings, said = _configured(tmp_path, name)
    assert settings.forecast.model == name
    assert build_forecaster(settings.forecast).name == name
    assert said == ([MEANING_CHANGED] if name == "naive" else [])


def test_naive_forecasts_a_band_where_persistence_gives_the_newest_value(tmp_path: Path) -> None:
    y = bursty(4 * DAY, seed=3)
    history = long_frame({"s": y})
    quantiles = (0.5, 0.9)
    out = {}
    for name in ("naive", "persistence"):
        settings, _ = _configured(tmp_path, name)
        model = build_forecaster(settings.forecast).fit(history, STEP)
        recent = history.iloc[len(history) - model.min_history_steps :]
        out[name] = model.predict(recent, 6, quantiles)
    naive, persistence = out["naive"], out["persistence"]
    assert set(naive["model"]) == {"naive"}
    assert (naive["q0.9"] > naive["q0.5"]).all(), naive[["q0.5", "q0.9"]]
    assert (persistence["q0.9"] == persistence["q0.5"]).all()
    assert (persistence["q0.9"] == y[-1]).all()
