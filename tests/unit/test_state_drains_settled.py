"""The drains a leader settled, kept in the planner memory's document (``drains_settled``): written and read back
exactly; absent from a document of the release before (none kept), which an older release of the same version reads
by ignoring the key; an entry that cannot be read is left out, never the document; a pool no longer configured loses
its entries; the keeper merges a replica's own with the stored ones at its first load and keeps the leader's own
afterwards; and the drains keep the latest so many over all pools, however old (``SettledDrains``), whose document
stays far below the 1 MiB a ConfigMap's data may hold with many pools."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from agent.drain_records import SETTLED_KEPT, SettledDrains
from agent.planning import PlannerMemory
from agent.state import InMemoryStateStore, MemoryKeeper
from agent.state.codec import decode, encode

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
KEY = "release-1/drain/gke-ml-a100-0-0001"
OTHER = "release-2/drain/gke-ml-v5e-0-0002"
MEMORY = PlannerMemory(drains_settled={"a100": {KEY: T0}, "v5e": {OTHER: T0 + timedelta(minutes=3)}})


def test_the_drains_settled_survive_the_document_exactly() -> None:
    assert decode(encode(MEMORY, T0, "leadtime-0")) == MEMORY
    document = json.loads(encode(MEMORY, T0, "leadtime-0"))
    assert document["version"] == 1  # a key an older release of version 1 ignores: no new version
    assert document["drains_settled"] == {
        "a100": {KEY: "2026-03-02T09:00:00+00:00"},
        "v5e": {OTHER: "2026-03-02T09:03:00+00:00"},
    }


def test_a_document_of_the_release_before_keeps_no_drains_settled() -> None:
    document = json.loads(encode(MEMORY.changed("a100", T0, -1), T0, "leadtime-0"))
    del document["drains_settled"]  # what the release before writes: every other key
    memory = decode(json.dumps(document))
    assert memory.drains_settled == {} and memory.last_change == {"a100": (T0, -1)}


@pytest.mark.parametrize("entry", ["2026-03-02T09:00:00", "yesterday", 3, None])
def test_an_entry_that_cannot_be_read_is_left_out_not_the_document(entry: object) -> None:
    document = json.loads(encode(MEMORY, T0, "leadtime-0"))
    document["drains_settled"]["a100"]["release-0/drain/gke-ml-a100-0-0009"] = entry
    document["drains_settled"]["t4"] = ["not", "a", "mapping"]
    assert decode(json.dumps(document)).drains_settled == MEMORY.drains_settled


def test_a_pool_no_longer_configured_loses_its_drains_settled() -> None:
    assert MEMORY.only(["a100", "v5e"]) is MEMORY
    assert MEMORY.only(["a100"]).drains_settled == {"a100": {KEY: T0}}


def test_the_first_load_adds_the_stored_drains_settled_to_this_replicas_own_then_keeps_the_leaders() -> None:
    """A replica that led, then stood by while another led and saved the drains it settled, leads again: its first
    load has both its own (one the other knows too, at a later time) and the other's."""
    own = PlannerMemory(drains_settled={"a100": {KEY: T0}})
    store = InMemoryStateStore("leadtime-0")
    store.save(own, T0)
    keeper = MemoryKeeper(store)
    assert keeper.before_tick(own)[0] == own  # it leads: the store is as it saved it
    other = store.replica("leadtime-1")
    other.load()
    later = T0 + timedelta(minutes=5)
    other.save(PlannerMemory(drains_settled={"a100": {KEY: later}, "v5e": {OTHER: later}}), later)

    keeper.resume()  # it leads again
    ours = replace(own, drains_settled={"a100": {KEY: T0, "release-3/drain/gke-ml-a100-0-0003": T0}})
    merged, error = keeper.before_tick(ours)
    assert error is None
    assert merged.drains_settled == {
        "a100": {KEY: later, "release-3/drain/gke-ml-a100-0-0003": T0},
        "v5e": {OTHER: later},
    }
    mine = replace(merged, drains_settled={"v5e": {OTHER: later}})  # what its drains keep from then on
    assert keeper.before_tick(mine)[0].drains_settled == {"v5e": {OTHER: later}}


def test_the_drains_keep_the_latest_drains_settled_over_all_pools_however_old() -> None:
    settled = SettledDrains()
    settled.add("a100", "weeks-old", T0 - timedelta(weeks=3))  # the latest, however old, are kept
    for n in range(SETTLED_KEPT + 1):
        settled.add(f"pool-{n % 3}", f"k{n}", T0 + timedelta(seconds=n))
    settled.recall({"v5e": {OTHER: T0 + timedelta(days=2)}})
    record = settled.record()
    assert sum(len(keys) for keys in record.values()) == SETTLED_KEPT  # over all pools, not per pool
    assert record["v5e"] == {OTHER: T0 + timedelta(days=2)}
    assert {"weeks-old", "k0", "k1"}.isdisjoint(settled.keys())  # the oldest dropped first, here too
    assert f"k{SETTLED_KEPT}" in record[f"pool-{SETTLED_KEPT % 3}"]

    few = SettledDrains()
    few.add("a100", "weeks-old", T0 - timedelta(weeks=3))
    assert few.record() == {"a100": {"weeks-old": T0 - timedelta(weeks=3)}}  # never dropped for its age


def test_the_document_of_many_pools_full_of_drains_settled_stays_far_below_a_configmaps_limit() -> None:
    """Sixteen GKE pools, each with 500 drains settled under realistic keys (a release's key, then the node's name):
    only the latest ``SETTLED_KEPT`` are written, about 270 KB. Kept 500 a pool, they made 1.03 MiB, over the 1 MiB a
    ConfigMap's data may hold: every save of the planner memory failed."""
    settled = SettledDrains()
    for p in range(16):
        pool = f"a100-spot-ew4-{p:02d}"
        for n in range(500):
            at = T0 + timedelta(minutes=n, seconds=p)
            node = f"gke-ml-prod-{pool}-{n % 97 + 0x1A2B3C00:08x}-{n:04x}"
            settled.add(pool, f"{pool}@{at.isoformat()}->{n % 7}/drain/{node}", at)
    memory = PlannerMemory(drains_settled=settled.record())
    size = len(encode(memory, T0, "leadtime-0").encode())
    assert sum(len(keys) for keys in memory.drains_settled.values()) == SETTLED_KEPT
    assert size < 300 * 1024, size  # 1 MiB is 1024 * 1024
    assert decode(encode(memory, T0, "leadtime-0")) == memory
