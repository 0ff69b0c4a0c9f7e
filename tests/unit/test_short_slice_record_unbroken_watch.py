"""What the slice record (``actuators.short_slices.ShortSlices``) takes back from the planner memory: only a record
within an unbroken watch whose hosts (Compute instance ids) show the slice may still be the same shortfall at this
adapter's next read of its group (none new, and some left where the record names any), and not one for a slice
this adapter's own reads found not short since; a slice never whole waits from its instance groups' creation whatever
a record says; and the last seen time moves once a quarter of the wait."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from actuators.short_slices import ShortSince, ShortSlices, same_shortfall

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WAIT = timedelta(minutes=20)
STOCKOUT = "2 of 4 hosts running: ZONE_RESOURCE_POOL_EXHAUSTED"
MINUTE = timedelta(minutes=1)
HOSTS = frozenset({"101", "102"})  # the two hosts of four that run while the slice is short
SLICE = "v5e-0"
GAP = timedelta(seconds=15) + 2 * MINUTE  # the lease duration and two ticks


def _slices() -> ShortSlices:
    return ShortSlices({"v5e": WAIT}, ["v5e"])


def _read(slices: ShortSlices, at: datetime, hosts: frozenset[str] = HOSTS) -> list[str]:
    """A read of the group that finds the slice short with ``hosts``: the slices given up."""
    return list(slices.given_up("v5e", {SLICE: STOCKOUT}, at, hosts={SLICE: hosts}))


def test_a_record_whose_hosts_are_the_slices_hosts_now_keeps_its_time_within_an_unbroken_watch() -> None:
    slices = _slices()
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + MINUTE, HOSTS)}}, T0 + 5 * MINUTE, GAP)
    assert _read(slices, T0 + 5 * MINUTE) == []
    assert _read(slices, T0 + WAIT - MINUTE) == []
    assert _read(slices, T0 + WAIT) == [SLICE]


def test_a_record_last_seen_longer_ago_than_an_unbroken_watch_starts_the_wait_again() -> None:
    slices = _slices()  # the agent down for 18 minutes: the slice may have been whole meanwhile
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + MINUTE, HOSTS)}}, T0 + WAIT - MINUTE, GAP)
    assert _read(slices, T0 + WAIT - MINUTE) == []
    assert _read(slices, T0 + WAIT) == []
    assert slices.known()["v5e"][SLICE][0] == T0 + WAIT - MINUTE


def test_a_slice_recovered_whole_and_short_again_within_a_few_minutes_waits_its_whole_new_wait() -> None:
    slices = _slices()
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 10 * MINUTE, HOSTS)}}, T0 + 14 * MINUTE, GAP)
    back = T0 + 14 * MINUTE  # every host recreated (new ids), two short again
    assert _read(slices, back, frozenset({"201", "202"})) == []
    assert slices.known() == {"v5e": {SLICE: ShortSince(back, back, frozenset({"201", "202"}))}}
    assert _read(slices, back + WAIT - MINUTE, frozenset({"201", "202"})) == []
    assert _read(slices, back + WAIT, frozenset({"201", "202"})) == [SLICE]


def test_a_host_created_since_the_record_starts_the_wait_again() -> None:
    slices = _slices()
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 10 * MINUTE, HOSTS)}}, T0 + 12 * MINUTE, GAP)
    assert _read(slices, T0 + 12 * MINUTE, HOSTS | {"103"}) == []  # a missing host came up: it may have been whole
    assert slices.known()["v5e"][SLICE][0] == T0 + 12 * MINUTE


def test_a_slice_with_no_host_left_takes_no_record_naming_hosts_within_an_unbroken_watch() -> None:
    slices = _slices()  # its hosts being recreated whole in a stockout: it may have been whole since the record
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + 10 * MINUTE, HOSTS)}}, T0 + 12 * MINUTE, GAP)
    _read(slices, T0 + 12 * MINUTE, frozenset())
    at = T0 + 12 * MINUTE
    assert slices.known()["v5e"][SLICE] == ShortSince(at, at, frozenset())


def test_the_same_shortfall_needs_no_host_new() -> None:
    assert same_shortfall(HOSTS, HOSTS)
    assert same_shortfall(HOSTS, frozenset({"101"}))  # one more host lost since: never whole meanwhile
    assert not same_shortfall(HOSTS, frozenset())  # none left: it may have been recovered whole since
    assert same_shortfall(frozenset(), frozenset())
    assert not same_shortfall(HOSTS, frozenset({"101", "201"}))
    assert not same_shortfall(frozenset(), frozenset({"201"}))  # none when first seen short: "201" came up since


def test_the_watch_counts_from_this_adapters_first_read_not_from_the_first_read_of_the_memory() -> None:
    slices = _slices()
    _read(slices, T0 + timedelta(minutes=15))  # a leader's watch, memory unread
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + timedelta(minutes=10), HOSTS)}}, T0 + timedelta(minutes=18), GAP)
    _read(slices, T0 + timedelta(minutes=18))
    assert slices.known() == {"v5e": {SLICE: ShortSince(T0, T0 + timedelta(minutes=15), HOSTS)}}


def test_a_slice_this_adapter_read_whole_since_its_first_read_takes_no_older_time() -> None:
    slices = _slices()
    slices.given_up("v5e", {}, T0)  # a standby reads the slice whole ...
    _read(slices, T0 + timedelta(minutes=50))  # ... and short again, with the same hosts (a host lost twice)
    record = {"v5e": {SLICE: ShortSince(T0 - timedelta(minutes=30), T0 + timedelta(minutes=49), HOSTS)}}
    slices.recall(record, T0 + timedelta(minutes=51), GAP)  # a leader's record, its saves refused meanwhile
    _read(slices, T0 + timedelta(minutes=51))
    at = T0 + timedelta(minutes=50)
    assert slices.known() == {"v5e": {SLICE: ShortSince(at, at, HOSTS)}}


def test_a_slice_this_adapter_read_not_short_at_its_latest_read_is_not_brought_back() -> None:
    slices = _slices()
    slices.given_up("v5e", {}, T0)
    slices.recall({"v5e": {SLICE: ShortSince(T0 - WAIT, T0, HOSTS)}}, T0, GAP)
    assert slices.known() == {}
    slices.given_up("v5e", {}, T0 + MINUTE)
    assert _read(slices, T0 + 2 * MINUTE) == []
    assert slices.known()["v5e"][SLICE][0] == T0 + 2 * MINUTE


def test_a_slice_never_whole_waits_from_its_instance_groups_creation_whatever_the_record_says() -> None:
    slices = _slices()
    created = T0 + timedelta(minutes=15)  # deleted and created again under the same name
    slices.recall({"v5e": {SLICE: ShortSince(T0, T0 + timedelta(minutes=12), HOSTS)}}, T0 + timedelta(minutes=16), GAP)
    asked = {SLICE: created}
    assert slices.given_up("v5e", {SLICE: STOCKOUT}, created + WAIT - MINUTE, asked, {SLICE: HOSTS}) == {}
    assert list(slices.given_up("v5e", {SLICE: STOCKOUT}, created + WAIT, asked, {SLICE: HOSTS})) == [SLICE]


def test_the_last_seen_time_moves_once_it_is_older_than_a_quarter_of_the_wait() -> None:
    slices = _slices()
    seen = []
    for minute in range(0, 12):
        slices.given_up("v5e", {SLICE: "2 of 4 hosts running"}, T0 + minute * MINUTE)
        seen.append(slices.known()["v5e"][SLICE][1])
    assert sorted(set(seen)) == [T0, T0 + 6 * MINUTE]
