"""The fake Compute Engine API answers ``listManagedInstances`` as ``tests/fakes/REFERENCE.md`` says, through the real
client: an instance with no VM (being created or recreated, none yet) has no ``id`` and no ``instanceStatus`` ("empty
when the instance does not exist"); one whose VM exists has both, a new id each time a VM is created for it, given as
soon as the VM exists while the group's action is still RECREATING or CREATING; and the VM of an instance the group
verifies, refreshes or abandons runs, one it restarts is prepared for boot again, one it deletes is stopping."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

PROJECT = "test-project"


def _listed(gke_api: FakeGkeApi) -> dict[str, Any]:
    mig = gke_api.pools["v5e-0"].migs[0]
    migs = google_clients(gke_api.url).migs
    found = migs.list_managed_instances(project=PROJECT, zone=mig.zone, instance_group_manager=mig.name)
    return {m.name: m for m in found}


def test_an_instance_with_no_vm_has_no_id_and_no_status_and_a_recreated_one_a_new_id(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("v5e-0", nodes=4)
    mig = gke_api.pools["v5e-0"].migs[0]
    before = _listed(gke_api)
    mig.instances[0].action = "RECREATING"  # no room for its new VM yet
    mig.instances[1].action = "RECREATING"
    mig.instances[1].status = "PROVISIONING"  # its new VM exists, the group still recreating it
    mig.instances[2].action = "RECREATING"
    mig.instances[2].action = "VERIFYING"  # its new VM created, being verified
    after = _listed(gke_api)
    lost, booting, verifying, kept = (after[i.name] for i in mig.instances)
    assert all(m.id and m.instance_status == "RUNNING" for m in before.values())
    assert not lost.id and not lost.instance_status  # was PROVISIONING
    assert "instance_status" not in lost and "id" not in lost
    assert booting.current_action == "RECREATING" and booting.instance_status == "PROVISIONING"
    assert booting.id and booting.id != before[booting.name].id  # was none until the group's action ended
    assert verifying.id and verifying.id != before[verifying.name].id and verifying.instance_status == "RUNNING"
    assert kept.id == before[kept.name].id and kept.instance_status == "RUNNING"
    mig.instances[1].action = "NONE"  # the same VM, now running
    assert _listed(gke_api)[mig.instances[1].name].id == booting.id


@pytest.mark.parametrize(
    ("action", "status"),
    [
        ("VERIFYING", "RUNNING"),
        ("REFRESHING", "RUNNING"),
        ("ABANDONING", "RUNNING"),
        ("RESTARTING", "STAGING"),
        ("DELETING", "STOPPING"),
    ],
)
def test_the_vm_of_an_instance_the_group_is_not_creating_keeps_its_id_with_the_status_its_action_gives(
    gke_api: FakeGkeApi, action: str, status: str
) -> None:
    gke_api.add_pool("v5e-0", nodes=1)
    instance = gke_api.pools["v5e-0"].migs[0].instances[0]
    before = _listed(gke_api)[instance.name]
    instance.action = action  # was PROVISIONING for each
    after = _listed(gke_api)[instance.name]
    assert (after.current_action, after.instance_status, after.id) == (action, status, before.id)


def test_a_status_a_test_sets_on_an_instance_being_created_gives_its_vm_an_id_and_none_without_it(
    gke_api: FakeGkeApi,
) -> None:
    gke_api.add_pool("v5e-0", nodes=2)
    gke_api.pools["v5e-0"].migs[0].instances[0].action = "CREATING"
    gke_api.pools["v5e-0"].migs[0].instances[1].action = "CREATING"
    gke_api.set_instance_status("v5e-0", "STAGING")
    first, second = _listed(gke_api).values()
    assert first.id and second.id and first.id != second.id and first.instance_status == "STAGING"
    gke_api.set_instance_status("v5e-0", "")
    assert not any(m.id or m.instance_status for m in _listed(gke_api).values())
