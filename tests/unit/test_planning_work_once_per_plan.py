"""The planner's per-plan work: what a replay asks for thousands of times is worked out once per plan or forecast.

A simulation plans every tick of every run over the same window, so work repeated per call adds up: the forecast's
levels are sorted once per forecast.
Each test counts that work on inputs that count how often they are read, and checks the results stay what they were.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from models import DemandForecast

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)
STEP = timedelta(minutes=5)


class CountedLevels(dict[float, tuple[float, ...]]):
    """Quantiles that count how often their levels are walked."""

    walks = 0

    def __iter__(self) -> Iterator[float]:
        CountedLevels.walks += 1
        return super().__iter__()


def test_a_forecast_sorts_its_levels_once_however_often_a_level_is_asked_for() -> None:
    levels = CountedLevels({0.99: (3.0,), 0.5: (1.0,), 0.9: (2.0,)})
    forecast = DemandForecast("a", NOW, STEP, levels, 1.0, "test")
    CountedLevels.walks = 0
    chosen = [forecast.level_at_or_above(level) for level in (0.1, 0.5, 0.7, 0.9, 0.95, 0.99, 0.999) * 100]
    assert chosen[:7] == [0.5, 0.5, 0.9, 0.9, 0.99, 0.99, 0.99]
    assert CountedLevels.walks == 1


def test_a_pickled_forecast_reads_its_levels_as_the_original_and_compares_equal_to_a_fresh_one() -> None:
    forecast = DemandForecast("a", NOW, STEP, {0.9: (2.0,), 0.5: (1.0,)}, 1.0, "test")
    assert forecast.level_at_or_above(0.6) == 0.9
    again = pickle.loads(pickle.dumps(forecast))
    fresh = DemandForecast("a", NOW, STEP, {0.9: (2.0,), 0.5: (1.0,)}, 1.0, "test")
    assert again == fresh
    assert [again.level_at_or_above(v) for v in (0.1, 0.6, 0.95)] == [0.5, 0.9, 0.9]
    assert repr(again) == repr(fresh)
