"""Every Google API method the adapters call has its facts written down in ``tests/fakes/REFERENCE.md``: a new call
fails here until the reference names the REST method it maps to (and so, the facts the fake relies on for it)."""

from __future__ import annotations

from pathlib import Path

from tests.deploy.test_gcp_role import calls_in

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = Path(__file__).with_name("REFERENCE.md")

# Client method -> the REST method (as the reference names it) it sends.
REST_METHOD = {
    ("_gke", "create_node_pool"): "`create`",
    ("_gke", "delete_node_pool"): "`delete`",
    ("_gke", "get_node_pool"): "`NodePool.instanceGroupUrls`",
    ("_gke", "list_node_pools"): "`NodePool.locations`",
    ("_gke", "get_operation"): "`projects.locations.operations`",
    ("_gke", "list_operations"): "`operations.list`",
    ("_gke", "set_node_pool_autoscaling"): "`NodePoolAutoscaling`",
    ("_gke", "set_node_pool_size"): "`nodePools/setSize`",
    ("_migs", "get"): "`instanceGroupManagers.get`",
    ("_migs", "list_managed_instances"): "`listManagedInstances`",
    ("_migs", "resize_unary"): "`instanceGroupManagers.resize`",
    ("_migs", "delete_instances_unary"): "`instanceGroupManagers.deleteInstances`",
    ("_tpu", "create_queued_resource"): "`queuedResources.create`",
    ("_tpu", "delete_queued_resource"): "`.delete`",
    ("_tpu", "list_queued_resources"): "`queuedResources.list`",
}


def test_every_google_call_of_the_adapters_is_in_the_reference() -> None:
    calls = {c for path in sorted((ROOT / "actuators").glob("*.py")) for c in calls_in(path.read_text())}
    unmapped = sorted(calls - REST_METHOD.keys())
    assert not unmapped, f"add these calls to REST_METHOD and their facts to REFERENCE.md: {unmapped}"
    text = REFERENCE.read_text(encoding="utf-8")
    missing = sorted(f"{c}: {REST_METHOD[c]}" for c in calls if REST_METHOD[c] not in text)
    assert not missing, f"REFERENCE.md says nothing of: {missing}"
