"""What the slice record (``actuators.short_slices.ShortSlices``) keeps of a slice's hosts and when a successor takes
its time back: the hosts the slice had when first seen short that every read since still found (never one that came
up since), and the time only within an unbroken watch and, where the record names hosts, while the slice's hosts are
some of them with none new. A record of a release that kept no host holds by the watch alone."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest

from actuators.short_slices import ShortSince, ShortSlices
from agent.planning import PlannerMemory
from agent.state.codec import decode, encode

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WAIT = timedelta(minutes=20)
MINUTE = timedelta(minutes=1)
GAP = timedelta(seconds=15) + 2 * MINUTE  # the lease duration and two ticks
STOCKOUT = "2 of 4 hosts running: ZONE_RESOURCE_POOL_EXHAUSTED"
HOSTS = frozenset({"101", "102"})  # the two hosts of four that run while the slice is short
SLICE = "v5e-0"
NONE: frozenset[str] = frozenset()


def _slices() -> ShortSlices:
    return ShortSlices({"v5e": WAIT}, ["v5e"])


def _read(slices: ShortSlices, at: datetime, hosts: frozenset[str] = HOSTS) -> list[str]:
    """A read of the group that finds the slice short with ``hosts``: the slices given up."""
    return list(slices.given_up("v5e", {SLICE: STOCKOUT}, at, hosts={SLICE: hosts}))


def _since(slices: ShortSlices) -> datetime:
    return slices.known()["v5e"][SLICE][0]


def test_a_record_saved_ninety_days_ago_with_the_same_hosts_starts_the_wait_again() -> None:
    slices = _slices()  # the two hosts that ran then restarted in place since (the same ids)
    ago = T0 - timedelta(days=90)
    slices.recall({"v5e": {SLICE: ShortSince(ago, ago, HOSTS)}}, T0, GAP)
    assert _read(slices, T0) == []  # was given up at once, "short of hosts for 90d"
    assert _since(slices) == T0


def test_the_hosts_kept_are_those_of_the_first_short_read_that_every_read_since_found() -> None:
    slices = _slices()
    _read(slices, T0, HOSTS)
    _read(slices, T0 + MINUTE, HOSTS | {"201", "202"})  # the lost hosts' new VMs booting: never named
    assert slices.known()["v5e"][SLICE][2] == HOSTS
    _read(slices, T0 + 2 * MINUTE, frozenset({"102", "201", "202", "203"}))  # 101 recreated too
    assert slices.known()["v5e"][SLICE][2] == frozenset({"102"})
    _read(slices, T0 + 3 * MINUTE, frozenset({"201", "202", "203", "204"}))  # recovered whole, still booting
    assert slices.known()["v5e"][SLICE] == ShortSince(T0, T0, NONE)


def test_a_record_whose_hosts_were_all_recreated_since_is_not_taken_for_a_slice_short_again() -> None:
    slices = _slices()
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 6 * MINUTE, NONE)}}, T0 + 9 * MINUTE, GAP)
    assert _read(slices, T0 + 9 * MINUTE, frozenset({"202", "203"})) == []  # hosts the record never named
    assert _since(slices) == T0 + 9 * MINUTE


def test_a_record_naming_no_host_holds_for_a_slice_still_with_none_within_the_watch() -> None:
    slices = _slices()
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 6 * MINUTE, NONE)}}, T0 + 9 * MINUTE, GAP)
    assert _read(slices, T0 + 9 * MINUTE, NONE) == []
    assert _read(slices, T0 + WAIT, NONE) == [SLICE]  # given up at the end of its first wait


@pytest.mark.parametrize(
    ("back", "kept"),
    [(6 * MINUTE + GAP + WAIT / 4, True), (6 * MINUTE + GAP + WAIT / 4 + MINUTE, False)],
    ids=["within-the-watch", "past-it"],
)
def test_a_record_of_the_same_hosts_holds_within_an_unbroken_watch_only(back: timedelta, kept: bool) -> None:
    slices = _slices()
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 6 * MINUTE, HOSTS)}}, T0 + back, GAP)
    _read(slices, T0 + back)
    assert (_since(slices) == T0) is kept


def test_a_record_of_a_release_that_kept_no_host_holds_by_the_watch_alone() -> None:
    slices = _slices()
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 6 * MINUTE, None)}}, T0 + 9 * MINUTE, GAP)
    _read(slices, T0 + 9 * MINUTE)
    assert slices.known()["v5e"][SLICE] == ShortSince(T0, T0 + 6 * MINUTE, HOSTS)  # its hosts from this read on
    late = _slices()
    late.recall({"v5e": {SLICE: ShortSince(T0, T0 + 6 * MINUTE, None)}}, T0 + 20 * MINUTE, GAP)
    _read(late, T0 + 20 * MINUTE)
    assert _since(late) == T0 + 20 * MINUTE


def test_an_entry_naming_no_host_is_not_told_as_saved_by_an_earlier_release(caplog: pytest.LogCaptureFixture) -> None:
    slices = _slices()
    caplog.set_level(logging.INFO, logger="actuators.short_slices")
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 6 * MINUTE, NONE)}}, T0 + 9 * MINUTE, GAP)
    _read(slices, T0 + 9 * MINUTE, NONE)
    assert "earlier release" not in caplog.text
    assert _since(slices) == T0


def test_no_host_and_a_release_that_kept_none_are_told_apart_in_the_state_document() -> None:
    memory = PlannerMemory(
        slices_short_since={"v5e": {"v5e-0": ShortSince(T0, T0, NONE), "v5e-1": ShortSince(T0, T0, None)}}
    )
    document = json.loads(encode(memory, T0, "leadtime-0"))
    assert document["slices_short_since"]["v5e"]["v5e-0"]["hosts"] == []
    assert "hosts" not in document["slices_short_since"]["v5e"]["v5e-1"]
    assert decode(json.dumps(document)) == memory
