"""Each class's demand now, as the loop's observation: the value read at the tick's time where the source gives one,
judged on its own time, else the newest value of the step grid; missing, NaN, implausible or stale is never a
demand."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from agent.observation import latest_observations

NOW = datetime(2025, 3, 3, 10, 3, tzinfo=UTC)
STEP = timedelta(minutes=5)
STALE = timedelta(minutes=10)
# The grid's newest step starts at 10:00 (covering 10:00-10:05).
FRAME = pd.DataFrame(
    {
        "unique_id": ["train", "train"],
        "ds": pd.DatetimeIndex([NOW - timedelta(minutes=8), NOW - timedelta(minutes=3)], tz="UTC"),
        "y": [12.0, 16.0],
    }
)


@pytest.mark.parametrize(
    ("instant", "observed", "problem"),
    [
        (None, 16.0, ""),  # no instant value: the grid's newest
        ((NOW, 48.0), 48.0, ""),  # the value at the tick wins over the grid's
        ((NOW, 0.0), 0.0, ""),  # a real zero read at the tick is a demand of zero
        ((NOW - timedelta(minutes=9), 48.0), 48.0, ""),
        # judged on its own time, not as a step that covers another 5 minutes: 11 minutes old is stale
        ((NOW - timedelta(minutes=11), 48.0), None, "newest value is 11m old (limit 10m)"),
        # told in whole seconds, as other durations are: not 0:15:10.798017
        ((NOW - timedelta(minutes=15, seconds=10, microseconds=798017), 48.0), None, "is 15m11s old (limit 10m)"),
        ((NOW, math.nan), None, "is NaN"),  # an older value does not stand in for a newer one that is missing
        ((NOW, -8.0), None, "not a demand"),
        ((NOW, math.inf), None, "not a demand"),
    ],
)
def test_the_observation_is_the_value_at_the_tick_where_there_is_one(
    instant: tuple[datetime, float] | None, observed: float | None, problem: str
) -> None:
    newest = {"train": instant} if instant is not None else {}
    got, problems = latest_observations(FRAME, ["train"], NOW, STEP, STALE, newest)
    assert got.get("train") == observed
    assert problem in problems.get("train", "")
    assert ("train" in problems) == (observed is None)


def test_a_class_without_grid_values_is_missing_unless_read_at_the_tick() -> None:
    got, problems = latest_observations(FRAME, ["train", "serve"], NOW, STEP, STALE, {})
    assert got == {"train": 16.0}
    assert "no observed value" in problems["serve"]
    got, problems = latest_observations(FRAME, ["train", "serve"], NOW, STEP, STALE, {"serve": (NOW, 4.0)})
    assert got == {"train": 16.0, "serve": 4.0} and problems == {}


def test_the_grid_value_is_stale_when_its_step_ended_longer_ago_than_allowed() -> None:
    later = NOW + timedelta(minutes=13)  # the 10:00-10:05 step ended 11 minutes before
    got, problems = latest_observations(FRAME, ["train"], later, STEP, STALE)
    assert got == {} and problems["train"] == "newest value is 11m old (limit 10m)"
