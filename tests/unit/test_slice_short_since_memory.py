"""Since when each TPU slice has been seen short of hosts, kept in the planner memory: its form in the state document
(absent in a memory an earlier release saved, an unreadable entry left out), what the memory keeps of it (configured
pools only), how the keeper merges it, and what the slice record takes back from it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from actuators.short_slices import ShortSince, ShortSlices
from agent.planning import PlannerMemory
from agent.state.codec import decode, encode
from agent.state.keeper import merge

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WAIT = timedelta(minutes=20)
STOCKOUT = "2 of 4 hosts running: ZONE_RESOURCE_POOL_EXHAUSTED"


HOSTS = frozenset({"101", "102"})  # the Compute instance ids of the slice's hosts that exist
GAP = timedelta(seconds=15) + timedelta(minutes=2)  # the lease duration and two ticks


def at(since: datetime, seen: datetime | None = None, hosts: frozenset[str] | None = frozenset()) -> ShortSince:
    return ShortSince(since, since if seen is None else seen, hosts)


def test_the_record_round_trips_through_the_state_document() -> None:
    memory = PlannerMemory(slices_short_since={"v5e": {"v5e-0": at(T0, T0 + WAIT / 4), "v5e-3": at(T0 + WAIT)}})
    text = encode(memory, T0 + WAIT, "leadtime-0")
    assert json.loads(text)["slices_short_since"] == {
        "v5e": {
            "v5e-0": {"since": "2026-03-02T09:00:00+00:00", "seen": "2026-03-02T09:05:00+00:00", "hosts": []},
            "v5e-3": {"since": "2026-03-02T09:20:00+00:00", "seen": "2026-03-02T09:20:00+00:00", "hosts": []},
        }
    }
    assert json.loads(text)["version"] == 1  # a release that does not know the key reads the rest
    assert decode(text) == memory


def test_a_memory_saved_by_an_earlier_release_knows_no_slice_short() -> None:
    document = json.loads(encode(PlannerMemory(blocked={"v5e": "403"}), T0, "leadtime-0"))
    del document["slices_short_since"]
    assert decode(json.dumps(document)) == PlannerMemory(blocked={"v5e": "403"})


def test_an_unreadable_slice_entry_is_left_out_not_the_memory() -> None:
    document = json.loads(encode(PlannerMemory(blocked={"v5e": "403"}), T0, "leadtime-0"))
    document["slices_short_since"] = {
        "v5e": {"v5e-0": "yesterday", "v5e-1": {"since": T0.isoformat(), "seen": T0.isoformat()}, "v5e-2": 7},
        "v4": [],
        "v6": {"v6-0": {"since": T0.isoformat()}, "v6-1": {"since": T0.isoformat(), "seen": "now"}},
    }
    assert decode(json.dumps(document)) == PlannerMemory(
        blocked={"v5e": "403"}, slices_short_since={"v5e": {"v5e-1": at(T0, hosts=None)}}
    )


def test_a_time_alone_as_the_release_before_wrote_it_is_since_and_seen_at_once() -> None:
    document = json.loads(encode(PlannerMemory(), T0, "leadtime-0"))
    document["slices_short_since"] = {"v5e": {"v5e-0": T0.isoformat()}}
    assert decode(json.dumps(document)) == PlannerMemory(slices_short_since={"v5e": {"v5e-0": at(T0, T0, None)}})


def test_the_memory_keeps_the_record_of_configured_pools_only() -> None:
    memory = PlannerMemory(slices_short_since={"v5e": {"v5e-0": at(T0)}, "gone": {"gone-0": at(T0)}})
    assert memory.pools() == {"v5e", "gone"}
    assert memory.only(["v5e"]) == PlannerMemory(slices_short_since={"v5e": {"v5e-0": at(T0)}})


def test_the_keeper_merges_the_record_per_pool() -> None:
    base = PlannerMemory(slices_short_since={"a": {"a-0": at(T0)}, "b": {"b-0": at(T0)}})
    ours = PlannerMemory(slices_short_since={"a": {"a-0": at(T0), "a-1": at(T0 + WAIT)}, "b": {"b-0": at(T0)}})
    theirs = PlannerMemory(slices_short_since={"a": {"a-0": at(T0)}})  # b's slice no longer short there
    assert merge(base, ours, theirs).slices_short_since == {"a": {"a-0": at(T0), "a-1": at(T0 + WAIT)}}


def test_a_record_taken_back_goes_on_with_the_earlier_first_read() -> None:
    restarted = ShortSlices({"v5e": WAIT}, ["v5e"])
    restarted.recall({"v5e": {"v5e-0": at(T0, T0 + WAIT / 4, HOSTS)}}, T0 + WAIT / 2, GAP)
    hosts = {"v5e-0": HOSTS}
    assert restarted.given_up("v5e", {"v5e-0": STOCKOUT}, T0 + WAIT / 2, hosts=hosts) == {}
    (why,) = restarted.given_up("v5e", {"v5e-0": STOCKOUT}, T0 + WAIT, hosts=hosts).values()
    assert why.startswith("insufficient capacity: short of hosts for 20m (the group waits 20m)")
    assert restarted.known() == {"v5e": {"v5e-0": at(T0, T0 + WAIT, HOSTS)}}


def test_a_later_time_in_the_record_does_not_move_a_wait_this_adapter_began_earlier() -> None:
    slices = ShortSlices({"v5e": WAIT}, ["v5e"])
    slices.given_up("v5e", {"v5e-0": STOCKOUT}, T0, hosts={"v5e-0": HOSTS})
    slices.recall({"v5e": {"v5e-0": at(T0 + WAIT / 2, T0 + WAIT / 2, HOSTS)}}, T0 + WAIT / 4, GAP)
    slices.given_up("v5e", {"v5e-0": STOCKOUT}, T0 + WAIT / 4, hosts={"v5e-0": HOSTS})
    assert slices.known() == {"v5e": {"v5e-0": at(T0, T0, HOSTS)}}


def test_its_own_record_handed_back_does_not_bring_back_a_slice_seen_whole_since() -> None:
    slices = ShortSlices({"v5e": WAIT}, ["v5e"])
    slices.given_up("v5e", {"v5e-0": STOCKOUT}, T0, hosts={"v5e-0": HOSTS})
    told = slices.known()
    slices.given_up("v5e", {}, T0 + WAIT / 2)  # whole at a read between ticks (the drainer's)
    slices.recall(told, T0 + WAIT / 2, GAP)  # the memory still holds the record handed out before that read
    assert slices.given_up("v5e", {"v5e-0": STOCKOUT}, T0 + WAIT, hosts={"v5e-0": HOSTS}) == {}  # a new wait
    assert slices.known() == {"v5e": {"v5e-0": at(T0 + WAIT, T0 + WAIT, HOSTS)}}


def test_a_record_of_a_group_the_adapter_does_not_read_is_not_taken() -> None:
    slices = ShortSlices({"v5e": WAIT}, ["v5e"])
    slices.recall({"v4": {"v4-0": at(T0, T0, HOSTS)}, "v5e": {"v5e-1": at(T0, T0, HOSTS)}}, T0, GAP)
    assert slices.known() == {"v5e": {"v5e-1": at(T0, T0, HOSTS)}}


def test_a_slice_no_longer_short_drops_out_of_the_record() -> None:
    slices = ShortSlices({"v5e": WAIT}, ["v5e"])
    slices.recall({"v5e": {"v5e-0": at(T0, T0, HOSTS), "v5e-1": at(T0, T0, HOSTS)}}, T0 + timedelta(minutes=1), GAP)
    slices.given_up("v5e", {"v5e-1": STOCKOUT}, T0 + timedelta(minutes=1), hosts={"v5e-1": HOSTS})
    assert slices.known() == {"v5e": {"v5e-1": at(T0, T0, HOSTS)}}
    slices.given_up("v5e", {}, T0 + timedelta(minutes=2))
    assert slices.known() == {}


def test_the_hosts_of_a_slice_round_trip_and_an_entry_with_unreadable_hosts_is_left_out() -> None:
    memory = PlannerMemory(slices_short_since={"v5e": {"v5e-0": at(T0, T0, HOSTS)}})
    document = json.loads(encode(memory, T0, "leadtime-0"))
    assert document["slices_short_since"]["v5e"]["v5e-0"]["hosts"] == ["101", "102"]
    assert decode(json.dumps(document)) == memory
    document["slices_short_since"]["v5e"]["v5e-1"] = {"since": T0.isoformat(), "seen": T0.isoformat(), "hosts": [7]}
    assert decode(json.dumps(document)) == memory
