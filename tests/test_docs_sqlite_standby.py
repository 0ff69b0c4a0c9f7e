"""The overlay docs/install.md gives for a standby on the SQLite ledger volume (``deploy/components/
sqlite-ledger-volume``), rendered by kustomize as an overlay two levels below a checkout, as the doc places it:
two replicas required on one node (the claim is ReadWriteOnce: only pods on the node it is attached to can mount
it), rolled out by starting a new pod before an old one stops, the component's ``Recreate`` replaced, and every
object valid against the Kubernetes schemas. The doc used to say two replicas covered rollouts while the component's
``Recreate`` stopped both pods first."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.daemon.manifests import DEPLOY, KUBECTL, find, render
from tests.deploy.test_install_manifests import KUBERNETES_VERSIONS, _errors

pytestmark = [
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: it renders the kustomize overlays"),
    pytest.mark.xdist_group("kustomize"),
]

INSTALL_DOC = DEPLOY.parent / "docs" / "install.md"


def _doc_overlay() -> str:
    text = INSTALL_DOC.read_text(encoding="utf-8")
    paragraph = text.split("**Standbys on the SQLite volume.**", 1)[1].split("\n`postgresql-ledger`", 1)[0]
    [block] = re.findall(r"```yaml\n(.*?)```", paragraph, re.DOTALL)
    return str(block)


def _rendered(tmp_path: Path) -> list[dict[str, Any]]:
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    mine = tmp_path / "overlays" / "mine"
    mine.mkdir(parents=True)
    (mine / "kustomization.yaml").write_text(_doc_overlay(), encoding="utf-8")
    objects = render("overlays/mine", root=tmp_path)
    for version in KUBERNETES_VERSIONS:
        assert _errors(objects, version) == []
    return objects


def test_the_docs_standby_overlay_keeps_two_replicas_on_the_volume_s_node_through_a_rollout(tmp_path: Path) -> None:
    objects = _rendered(tmp_path)
    (claim,) = find(objects, "PersistentVolumeClaim", "leadtime-ledger")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    (deployment,) = find(objects, "Deployment", "leadtime")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod = spec["template"]["spec"]
    (state,) = [v for v in pod["volumes"] if v["name"] == "state"]
    assert state == {"name": "state", "persistentVolumeClaim": {"claimName": "leadtime-ledger"}}
    (term,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    # The term selects the pods of the old ReplicaSet and the new one alike, so a new pod joins the old ones' node.
    assert term["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert term["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    assert "nodeAffinity" in pod["affinity"], "the base's node affinity (no accelerator nodes) is kept"
    (budget,) = find(objects, "PodDisruptionBudget", "leadtime")
    assert budget["spec"]["maxUnavailable"] == 1  # node drains stay possible
