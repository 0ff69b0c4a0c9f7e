"""The hindsight mix of per-class service levels in ``bench/bench_class_levels.py``, on hand-made curves."""

from __future__ import annotations

import pytest

from agent.simulation.equal_service import Trial
from bench.bench_class_levels import ClassCurve, cheapest_mix, time_mix

# "cheap" cuts 9 unserved chip-hours for 10 USD; "dear" cuts 1 for 100 USD. Demand is 1,000 chip-hours.
CURVES = {
    "cheap": ClassCurve(cost={0.5: 100.0, 0.9: 110.0}, unserved={0.5: 10.0, 0.9: 1.0}),
    "dear": ClassCurve(cost={0.5: 100.0, 0.9: 200.0}, unserved={0.5: 2.0, 0.9: 1.0}),
}


def test_the_mix_spends_protection_where_it_buys_the_most_unserved_hours() -> None:
    # 0.3% unserved: protecting "cheap" alone reaches it (1 + 2 = 3 chip-hours) for 210 USD, the exact target.
    cost, pick = cheapest_mix(CURVES, demanded=1000.0, target=0.003)
    assert cost == pytest.approx(210.0)
    assert pick == {"cheap": 0.9, "dear": 0.5}


def test_a_target_between_two_mixes_is_priced_on_the_line_between_them() -> None:
    # 0.25%: between (3 chip-hours, 210 USD) and (2 chip-hours, 310 USD), halfway: 260 USD; both classes protected.
    cost, pick = cheapest_mix(CURVES, demanded=1000.0, target=0.0025)
    assert cost == pytest.approx(260.0)
    assert pick == {"cheap": 0.9, "dear": 0.9}


def test_an_unreachable_target_says_so() -> None:
    curves = {"only": ClassCurve(cost={0.5: 1.0, 0.9: 2.0}, unserved={0.5: 5.0, 0.9: 4.0})}
    with pytest.raises(SystemExit, match="no mix of levels reaches"):
        cheapest_mix(curves, demanded=100.0, target=0.01)


def test_levels_mixed_over_time_skip_a_level_that_buys_little() -> None:
    # One level for all, demand 1,000 chip-hours: 0.98 costs 60 USD more than 0.97 for 1 chip-hour less unserved;
    # 0.99 cuts 9 for 100 USD. At 0.98's 0.9% the hull mixes 0.97 for 8/9 of the window and 0.99 for 1/9:
    # 100 + 100 / 9 USD, not 0.98's 160. At 0.1% only 0.99 itself reaches it.
    points = [
        Trial(0.97, 100.0, 0.010),
        Trial(0.98, 160.0, 0.009),
        Trial(0.99, 200.0, 0.001),
    ]
    assert time_mix(points, demanded=1000.0, target=0.009) == pytest.approx(100.0 + 100.0 / 9, abs=0.01)
    assert time_mix(points, demanded=1000.0, target=0.001) == pytest.approx(200.0)
