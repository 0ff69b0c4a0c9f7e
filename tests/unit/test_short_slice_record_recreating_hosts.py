"""A slice's host being recreated (RECREATING, its old VM maybe still being deleted with its old id) is never a host
the short-of-hosts record names (``actuators.short_slices.recreating``): a record is not taken for a slice with one,
and no record keeps one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from actuators.short_slices import ShortSince, ShortSlices, recreating, same_shortfall, settled

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WAIT = timedelta(minutes=20)
STOCKOUT = "0 of 4 hosts running: ZONE_RESOURCE_POOL_EXHAUSTED"
HOSTS = frozenset({"101", "102"})  # the two hosts that ran while the slice was first short
STOPPING = frozenset(recreating(h) for h in HOSTS)  # the same two, recreated: their old VMs still being deleted
SLICE = "v5e-0"


def test_a_host_being_recreated_is_never_one_the_record_names() -> None:
    assert not same_shortfall(HOSTS, STOPPING)
    assert not same_shortfall(HOSTS, frozenset({"101", recreating("102")}))
    assert not same_shortfall(frozenset(), frozenset({recreating("201")}))  # a new VM booting in a recovery
    assert settled(HOSTS | STOPPING) == HOSTS


def test_a_record_read_while_its_hosts_old_vms_stop_starts_the_wait_again_and_keeps_none_of_them() -> None:
    slices = ShortSlices({"v5e": WAIT}, ["v5e"])
    slices.recall({"v5e": {SLICE: (T0, T0 + timedelta(minutes=8), HOSTS)}}, T0 + timedelta(minutes=13), timedelta())
    at = T0 + timedelta(minutes=13)
    assert slices.given_up("v5e", {SLICE: STOCKOUT}, at, hosts={SLICE: STOPPING}) == {}
    assert slices.known() == {"v5e": {SLICE: ShortSince(at, at, frozenset())}}
