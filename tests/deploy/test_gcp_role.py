"""The Google Cloud custom role in ``deploy/gcp/leadtime-role.yaml`` holds exactly the IAM permissions that the
API calls in ``actuators/`` need: a new call without its permission, or a permission no call needs, fails here.

Which permission each REST method needs, from Google's references:
- GKE: "API permissions" (cloud.google.com/kubernetes-engine/docs/reference/api-permissions): nodePools
  create/delete/setSize/setAutoscaling need ``container.clusters.update``; nodePools get/list need
  ``container.clusters.get``; operations get/list need ``container.operations.get`` / ``.list``.
- Compute: each method's "Authorization requires the following IAM permission" line in the Compute Engine REST
  reference: instanceGroupManagers get/listManagedInstances/listErrors need ``compute.instanceGroupManagers.get``;
  resize/deleteInstances need ``compute.instanceGroupManagers.update``.
- GKE node service accounts: a created node pool's VMs run as its ``NodeConfig.serviceAccount`` (unset: the
  project's Compute Engine default service account, per the GKE v1 REST reference), which needs
  ``iam.serviceAccounts.actAs`` on that account (``roles/iam.serviceAccountUser``, granted on the account: GKE's
  "Configure GKE node service accounts", after which principals "can use that service account to create clusters
  and node pools"). It is granted on the node service account, not in the project's custom role.
- Cloud TPU: queuedResources create/delete/list/get need ``tpu.queuedResources.create`` / ``.delete`` /
  ``.list`` / ``.get``; a queued resource creates its TPU nodes in the caller's name (``tpu.nodes.create``), and a
  forced delete deletes them (``tpu.nodes.delete``), per the Cloud TPU access control page.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.deploy import sdk_calls

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "deploy" / "gcp" / "leadtime-role.yaml"

# The attribute each Google client is kept under in the actuators, and the permissions of each method called.
CLIENTS = {
    "_gke": "container_v1.ClusterManagerClient",
    "_migs": "compute_v1.InstanceGroupManagersClient",
    "_tpu": "tpu_v2.TpuClient",
}
PERMISSIONS: dict[tuple[str, str], frozenset[str]] = {
    ("_gke", "get_node_pool"): frozenset({"container.clusters.get"}),
    ("_gke", "list_node_pools"): frozenset({"container.clusters.get"}),
    ("_gke", "set_node_pool_size"): frozenset({"container.clusters.update"}),
    ("_gke", "set_node_pool_autoscaling"): frozenset({"container.clusters.update"}),
    ("_gke", "create_node_pool"): frozenset({"container.clusters.update"}),
    ("_gke", "delete_node_pool"): frozenset({"container.clusters.update"}),
    ("_gke", "get_operation"): frozenset({"container.operations.get"}),
    ("_gke", "list_operations"): frozenset({"container.operations.list"}),
    ("_migs", "get"): frozenset({"compute.instanceGroupManagers.get"}),
    ("_migs", "list_managed_instances"): frozenset({"compute.instanceGroupManagers.get"}),
    ("_migs", "list_errors"): frozenset({"compute.instanceGroupManagers.get"}),
    ("_migs", "resize"): frozenset({"compute.instanceGroupManagers.update"}),
    ("_migs", "resize_unary"): frozenset({"compute.instanceGroupManagers.update"}),
    ("_migs", "delete_instances"): frozenset({"compute.instanceGroupManagers.update"}),
    ("_migs", "delete_instances_unary"): frozenset({"compute.instanceGroupManagers.update"}),
    ("_tpu", "list_queued_resources"): frozenset({"tpu.queuedResources.list"}),
    ("_tpu", "get_queued_resource"): frozenset({"tpu.queuedResources.get"}),
    ("_tpu", "create_queued_resource"): frozenset({"tpu.queuedResources.create", "tpu.nodes.create"}),
    ("_tpu", "delete_queued_resource"): frozenset({"tpu.queuedResources.delete", "tpu.nodes.delete"}),
}

# Permissions a call needs on the node service account it attaches, granted on that account (not in the role).
ON_NODE_SERVICE_ACCOUNT: dict[tuple[str, str], frozenset[str]] = {
    ("_gke", "create_node_pool"): frozenset({"iam.serviceAccounts.actAs"}),
}


def calls_in(source: str) -> set[tuple[str, str]]:
    return sdk_calls.calls_in(source, CLIENTS)


def _calls() -> set[tuple[str, str]]:
    return {call for path in sorted((ROOT / "actuators").glob("*.py")) for call in calls_in(path.read_text())}


def _role() -> set[str]:
    return set(yaml.safe_load(ROLE.read_text())["includedPermissions"])


def test_the_scan_finds_the_calls_it_should() -> None:
    assert calls_in("class A:\n    def f(self):\n        return self._gke.set_node_pool_size(name='x')\n") == {
        ("_gke", "set_node_pool_size")
    }
    calls = _calls()
    assert ("_gke", "get_node_pool") in calls and ("_tpu", "create_queued_resource") in calls


def test_every_call_the_actuators_make_has_a_known_permission() -> None:
    unknown = sorted(f"{CLIENTS[attr]}.{method}" for attr, method in _calls() - PERMISSIONS.keys())
    assert unknown == [], f"add the IAM permission of these calls to PERMISSIONS and the role: {unknown}"


def test_the_role_holds_exactly_the_permissions_the_calls_need() -> None:
    needed = set().union(*(PERMISSIONS[call] for call in _calls()))
    role = _role()
    assert role == needed, f"missing: {sorted(needed - role)}; not needed: {sorted(role - needed)}"


def test_the_docs_show_the_role_and_how_to_bind_it() -> None:
    doc = (ROOT / "docs" / "google-cloud.md").read_text()
    assert "deploy/gcp/leadtime-role.yaml" in doc
    assert "roles/iam.workloadIdentityUser" in doc
    for permission in _role():
        assert permission in doc, f"docs/google-cloud.md does not list {permission}"


def test_the_docs_grant_act_as_on_the_node_service_account_for_each_call_that_needs_it() -> None:
    """``nodePools.create`` of a TPU slice attaches a node service account: the agent needs actAs on it, granted
    with ``roles/iam.serviceAccountUser`` on that account, as docs/google-cloud.md shows and the role file says."""
    needed = set().union(*(ON_NODE_SERVICE_ACCOUNT.get(call, frozenset()) for call in _calls()))
    assert needed == {"iam.serviceAccounts.actAs"}, "a slice is created with nodePools.create, which needs actAs"
    assert not needed & _role(), "actAs belongs on the node service account, not in the project-wide role"
    doc = (ROOT / "docs" / "google-cloud.md").read_text()
    section = doc.split("## 3.", 1)[1].split("## 4.", 1)[0]
    binding = re.search(
        r"gcloud iam service-accounts add-iam-policy-binding \"?\$NODE_SA\"? \\\n"
        r"\s+--role=roles/iam\.serviceAccountUser",
        section,
    )
    assert binding, "docs/google-cloud.md step 3 does not grant roles/iam.serviceAccountUser on the node SA"
    assert "| `iam.serviceAccounts.actAs`" in section, "the permission table has no row for actAs"
    assert "roles/iam.serviceAccountUser" in ROLE.read_text() and "NODE_SA" in ROLE.read_text()
