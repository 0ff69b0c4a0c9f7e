"""The fake Compute Engine API answers ``listManagedInstances`` as ``tests/fakes/REFERENCE.md`` says, through the real
client: an instance with no VM (being created or recreated) has no ``id`` and no ``instanceStatus`` ("empty when the
instance does not exist"); one whose VM exists has both, and a new id each time a VM is created for it."""

from __future__ import annotations

from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

PROJECT = "test-project"


def test_an_instance_with_no_vm_has_no_id_and_no_status_and_a_recreated_one_a_new_id(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("v5e-0", nodes=3)
    mig = gke_api.pools["v5e-0"].migs[0]
    migs = google_clients(gke_api.url).migs
    before = {
        m.name: m for m in migs.list_managed_instances(project=PROJECT, zone=mig.zone, instance_group_manager=mig.name)
    }
    mig.instances[0].action = "RECREATING"  # no room for its new VM yet
    mig.instances[1].action = "RECREATING"
    mig.instances[1].action = "VERIFYING"  # its new VM exists, not running yet
    after = {
        m.name: m for m in migs.list_managed_instances(project=PROJECT, zone=mig.zone, instance_group_manager=mig.name)
    }
    lost, booting, kept = (after[i.name] for i in mig.instances)
    assert all(m.id and m.instance_status == "RUNNING" for m in before.values())
    assert not lost.id and not lost.instance_status  # was PROVISIONING
    assert "instance_status" not in lost and "id" not in lost
    assert booting.id and booting.id != before[booting.name].id and booting.instance_status == "PROVISIONING"
    assert kept.id == before[kept.name].id and kept.instance_status == "RUNNING"
