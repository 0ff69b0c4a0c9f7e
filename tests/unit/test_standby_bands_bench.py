"""The clock bands and rule families of ``bench/bench_standby_bands.py`` on hand-made series."""

from __future__ import annotations

import numpy as np

from bench.bench_standby_bands import (
    flat_jumps,
    hour_bands,
    monotone_family,
    monotone_tables,
    offset_family,
    others_rose,
)
from bench.standby_sim import N_BUCKETS, simulate


def test_a_flat_jump_is_a_rise_after_base_steps_of_unchanged_need() -> None:
    need = np.array([1, 1, 1, 2, 3, 3, 3, 3, 2, 2, 2, 4])
    observed = np.ones(len(need), dtype=bool)
    # unchanged 2 steps before the rise at 3; the rise at 4 follows a change; the fall at 8 is no jump
    assert np.flatnonzero(flat_jumps(need, observed, 2)).tolist() == [3, 11]
    assert np.flatnonzero(flat_jumps(need, observed, 3)).tolist() == []
    observed[10] = False  # a gap starts the stretch again, and a rise across it is not seen
    assert np.flatnonzero(flat_jumps(need, observed, 2)).tolist() == [3]


def test_hour_bands_rank_hours_by_their_jump_rate_before_the_window_only() -> None:
    hour = np.tile(np.arange(24), 4)  # four days of hourly steps
    jumps = np.zeros((2, len(hour)), dtype=bool)
    jumps[0, [9, 33, 57]] = True  # hour 9, three days running
    jumps[1, [10, 34]] = True  # hour 10, twice
    jumps[:, 72:] = True  # the fourth day: every hour, but after ``upto``
    observed = np.ones(len(hour), dtype=bool)
    bands = hour_bands(hour, jumps, observed, 72, [0.5, 2.0])
    # mean rate 5 / (24 * 3 * 2); hour 9 is 14.4 times it, hour 10 9.6 times, every other hour 0
    assert bands.tolist() == [0] * 9 + [2, 2] + [0] * 13
    assert hour_bands(hour, jumps, observed, 96, [0.5]).tolist() == [1] * 24  # with the fourth day, all above half


def test_the_offset_family_shifts_the_reference_table_down_below_it_and_up_above_it() -> None:
    tables, offsets = offset_family(1, 3, reference=1)
    assert tables.shape == (2**N_BUCKETS * 2 * 2, 3 * N_BUCKETS)
    rows = {tuple(r) for r in tables.tolist()}
    ones = [1] * N_BUCKETS
    assert tuple([0] * N_BUCKETS + ones + [2] * N_BUCKETS) in rows  # quiet -1, busy +1
    assert tuple(ones * 3) in rows
    assert tuple([0] * N_BUCKETS * 2 + [1] * N_BUCKETS) in rows  # zero shifted down stays zero
    unshifted = np.all(offsets == 0, axis=1)
    assert unshifted.sum() == 2**N_BUCKETS
    assert np.all(tables[unshifted][:, :N_BUCKETS] == tables[unshifted][:, N_BUCKETS : 2 * N_BUCKETS])


def test_monotone_tables_never_hold_more_for_longer_unchanged_need() -> None:
    mono = monotone_tables(2)
    assert len(mono) == 28  # non-increasing sequences of 6 values in 0..2
    assert np.all(np.diff(mono[:, :6], axis=1) <= 0)
    assert np.all(mono[:, 6] == mono[:, 0])
    assert len(monotone_family(2, 2)) == 28 * 28


def test_a_band_picks_its_own_table_in_the_replay() -> None:
    # Need 0 then a jump to 2 at step 4, lead 2, hold 1; one standby unit in band 1 (steps 0-3), none in band 0.
    need = np.array([0, 0, 0, 0, 2, 2, 2, 2])
    table = np.array([[[0] * N_BUCKETS + [1] * N_BUCKETS]])
    band = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    kwargs = {"lead": 2, "hold": 1, "max_units": 10, "chips": 10, "start_units": np.zeros(1), "n_days": 1}
    observed = np.ones(8, dtype=bool)
    day_of = np.zeros(8, dtype=np.int64)
    _, short = simulate(need, need * 10.0, observed, N_BUCKETS * band, table, day_of, **kwargs)  # type: ignore[arg-type]
    _, none = simulate(need, need * 10.0, observed, np.zeros(8, dtype=np.int64), table, day_of, **kwargs)  # type: ignore[arg-type]
    # The tick at a step sees the step before it: the jump at step 4 is asked for at step 5 and ready at step 7,
    # so steps 4-6 miss 20 chips each without standby; the band-1 unit asked for at step 1 serves 10 of them.
    assert short.tolist() == [[30.0]]
    assert none.tolist() == [[60.0]]


def test_others_rose_marks_a_pool_when_another_pool_rose_recently() -> None:
    need = np.array([[0, 1, 1, 1, 1, 1], [0, 0, 0, 0, 2, 2], [0, 0, 0, 0, 0, 0]])
    observed = np.ones(6, dtype=bool)
    # pool 0 rose at step 1, pool 1 at step 4; within the last 2 steps (the step itself and one before)
    assert others_rose(need, observed, 2).tolist() == [
        [0, 0, 0, 0, 1, 1],
        [0, 1, 1, 0, 0, 0],
        [0, 1, 1, 0, 1, 1],
    ]
    observed[4] = False  # a rise into or out of a gap is not seen
    assert others_rose(need, observed, 2)[0].tolist() == [0] * 6
