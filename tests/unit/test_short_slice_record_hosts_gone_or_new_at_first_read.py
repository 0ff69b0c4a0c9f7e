"""When the slice record (``actuators.short_slices.ShortSlices``) read back from the planner memory is not taken for
the slice's shortfall now: a record naming hosts for a slice with none left (recovered whole since in a stockout: every
host recreated, none with a VM), and a record that the hosts at this adapter's own first read tell of another episode
(a host new to it then), even once a later read no longer finds that host. The ids kept are the record's that each of
this adapter's reads found."""

from __future__ import annotations

import logging

import pytest

from actuators.short_slices import ShortSince
from tests.unit.test_short_slice_record_first_hosts import (
    GAP,
    HOSTS,
    MINUTE,
    NONE,
    SLICE,
    T0,
    WAIT,
    _read,
    _since,
    _slices,
)


def test_a_record_naming_hosts_starts_the_wait_again_for_a_slice_with_no_host_now() -> None:
    slices = _slices()  # short since T0 with 101 and 102, recovered whole since and short of every host again
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 6 * MINUTE, HOSTS)}}, T0 + 9 * MINUTE, GAP)
    assert _read(slices, T0 + 9 * MINUTE, NONE) == []
    assert _since(slices) == T0 + 9 * MINUTE
    assert _read(slices, T0 + 9 * MINUTE + WAIT - MINUTE, NONE) == []  # was given up at T0 + 20m
    assert _read(slices, T0 + 9 * MINUTE + WAIT, NONE) == [SLICE]


def test_the_line_saying_the_wait_starts_again_says_no_host_of_the_record_is_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slices = _slices()
    caplog.set_level(logging.INFO, logger="actuators.short_slices")
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 6 * MINUTE, HOSTS)}}, T0 + 9 * MINUTE, GAP)
    _read(slices, T0 + 9 * MINUTE, NONE)
    assert "none of the hosts it had then is left" in caplog.text
    assert "came up since" not in caplog.text


def test_hosts_new_to_the_record_at_this_adapters_first_read_are_not_forgotten_once_none_is_left() -> None:
    slices = _slices()  # the memory's first reads fail: this adapter watches the group meanwhile
    _read(slices, T0 + 8 * MINUTE, frozenset({"301", "302"}))  # recovered since the record, short again
    _read(slices, T0 + 9 * MINUTE, NONE)  # and recovered whole again in the stockout: no VM
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 6 * MINUTE, HOSTS)}}, T0 + 10 * MINUTE, GAP)
    _read(slices, T0 + 10 * MINUTE, NONE)
    assert _since(slices) == T0 + 8 * MINUTE


def test_a_host_new_to_the_record_at_this_adapters_first_read_tells_another_episode_though_gone_since() -> None:
    slices = _slices()
    _read(slices, T0 + 8 * MINUTE, frozenset({"101", "301"}))  # 301 came up after the record's last save ...
    _read(slices, T0 + 9 * MINUTE, frozenset({"101"}))  # ... and is lost again: only a host the record names
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 6 * MINUTE, HOSTS)}}, T0 + 10 * MINUTE, GAP)
    assert _read(slices, T0 + 10 * MINUTE, frozenset({"101"})) == []
    assert _since(slices) == T0 + 8 * MINUTE
    assert _read(slices, T0 + WAIT, frozenset({"101"})) == []  # was given up at T0 + 20m
    assert _read(slices, T0 + 8 * MINUTE + WAIT, frozenset({"101"})) == [SLICE]


def test_the_hosts_kept_from_a_record_taken_back_are_those_each_read_of_this_adapter_found() -> None:
    slices = _slices()
    _read(slices, T0 + 8 * MINUTE, frozenset({"101"}))  # the instance group holding 102 not found (404) at this read
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 6 * MINUTE, HOSTS)}}, T0 + 9 * MINUTE, GAP)
    _read(slices, T0 + 9 * MINUTE, HOSTS)
    assert slices.known() == {"v5e": {SLICE: ShortSince(T0, T0 + 8 * MINUTE, frozenset({"101"}))}}
