"""What the slice record (``actuators.short_slices.ShortSlices``) takes back from the planner memory: only a record
that, with this adapter's own reads, makes an unbroken watch of the slice; a slice never whole waits from its
instance groups' creation whatever a record says; and the last seen time moves once a quarter of the wait."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from actuators.short_slices import ShortSince, ShortSlices

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WAIT = timedelta(minutes=20)
GAP = timedelta(minutes=2, seconds=15)  # the lease duration and two ticks
STOCKOUT = "2 of 4 hosts running: ZONE_RESOURCE_POOL_EXHAUSTED"
MINUTE = timedelta(minutes=1)


def _slices() -> ShortSlices:
    return ShortSlices({"v5e": WAIT}, ["v5e"])


def test_a_record_last_seen_within_an_unbroken_watch_of_the_first_read_is_taken() -> None:
    slices = _slices()
    first_read = T0 + timedelta(minutes=12)
    slices.recall({"v5e": {"v5e-0": ShortSince(T0, first_read - GAP - WAIT / 4)}}, first_read, GAP)
    assert slices.given_up("v5e", {"v5e-0": STOCKOUT}, T0 + WAIT - MINUTE) == {}
    assert list(slices.given_up("v5e", {"v5e-0": STOCKOUT}, T0 + WAIT)) == ["v5e-0"]


def test_a_record_last_seen_longer_ago_starts_the_wait_again() -> None:
    slices = _slices()
    first_read = T0 + timedelta(hours=2)
    slices.recall({"v5e": {"v5e-0": ShortSince(T0, first_read - GAP - WAIT / 4 - MINUTE)}}, first_read, GAP)
    assert slices.given_up("v5e", {"v5e-0": STOCKOUT}, first_read) == {}
    assert slices.known() == {"v5e": {"v5e-0": ShortSince(first_read, first_read)}}
    assert slices.given_up("v5e", {"v5e-0": STOCKOUT}, first_read + WAIT - MINUTE) == {}
    assert list(slices.given_up("v5e", {"v5e-0": STOCKOUT}, first_read + WAIT)) == ["v5e-0"]


def test_the_watch_counts_from_this_adapters_first_read_not_from_the_first_read_of_the_memory() -> None:
    slices = _slices()
    slices.given_up("v5e", {"v5e-0": STOCKOUT}, T0 + timedelta(minutes=15))  # a leader's watch, memory unread
    slices.recall({"v5e": {"v5e-0": ShortSince(T0, T0 + timedelta(minutes=10))}}, T0 + timedelta(minutes=18), GAP)
    assert slices.known() == {"v5e": {"v5e-0": ShortSince(T0, T0 + timedelta(minutes=15))}}


def test_a_slice_this_adapter_read_whole_since_its_first_read_takes_no_older_time() -> None:
    slices = _slices()
    slices.given_up("v5e", {}, T0)  # a standby reads the slice whole ...
    slices.given_up("v5e", {"v5e-0": STOCKOUT}, T0 + timedelta(minutes=50))  # ... and short again
    record = {"v5e": {"v5e-0": ShortSince(T0 - timedelta(minutes=30), T0 + timedelta(minutes=49))}}
    slices.recall(record, T0 + timedelta(minutes=51), GAP)  # a leader's record, its saves refused meanwhile
    assert slices.known() == {"v5e": {"v5e-0": ShortSince(T0 + timedelta(minutes=50), T0 + timedelta(minutes=50))}}


def test_a_slice_this_adapter_read_not_short_at_its_latest_read_is_not_brought_back() -> None:
    slices = _slices()
    slices.given_up("v5e", {}, T0)
    slices.recall({"v5e": {"v5e-0": ShortSince(T0 - WAIT, T0)}}, T0 + MINUTE, GAP)
    assert slices.known() == {}


def test_a_slice_never_whole_waits_from_its_instance_groups_creation_whatever_the_record_says() -> None:
    slices = _slices()
    created = T0 + timedelta(minutes=15)  # deleted and created again under the same name
    slices.recall({"v5e": {"v5e-0": ShortSince(T0, T0 + timedelta(minutes=12))}}, created + MINUTE, GAP)
    asked = {"v5e-0": created}
    assert slices.given_up("v5e", {"v5e-0": STOCKOUT}, created + WAIT - MINUTE, asked) == {}
    assert list(slices.given_up("v5e", {"v5e-0": STOCKOUT}, created + WAIT, asked)) == ["v5e-0"]


def test_the_last_seen_time_moves_once_it_is_older_than_a_quarter_of_the_wait() -> None:
    slices = _slices()
    seen = []
    for minute in range(0, 12):
        slices.given_up("v5e", {"v5e-0": "2 of 4 hosts running"}, T0 + minute * MINUTE)
        seen.append(slices.known()["v5e"]["v5e-0"][1])
    assert sorted(set(seen)) == [T0, T0 + 6 * MINUTE]


def test_a_time_read_back_from_before_a_whole_slices_creation_is_dropped() -> None:
    slices = _slices()
    first_read = T0 + timedelta(minutes=17)
    slices.recall({"v5e": {"v5e-0": ShortSince(T0, T0 + timedelta(minutes=10))}}, first_read, GAP)
    assert slices.inherited("v5e", "v5e-0")
    created = {"v5e-0": T0 + timedelta(minutes=14)}  # deleted and created again under the same name
    assert slices.given_up("v5e", {"v5e-0": STOCKOUT}, first_read, created=created) == {}
    assert not slices.inherited("v5e", "v5e-0")
    assert slices.known() == {"v5e": {"v5e-0": ShortSince(first_read, first_read)}}


def test_a_time_read_back_from_after_the_slices_creation_is_kept() -> None:
    slices = _slices()
    first_read = T0 + timedelta(minutes=17)
    slices.recall({"v5e": {"v5e-0": ShortSince(T0, T0 + timedelta(minutes=10))}}, first_read, GAP)
    created = {"v5e-0": T0 - timedelta(days=3)}
    slices.given_up("v5e", {"v5e-0": STOCKOUT}, first_read, created=created)
    assert list(slices.given_up("v5e", {"v5e-0": STOCKOUT}, T0 + WAIT)) == ["v5e-0"]
