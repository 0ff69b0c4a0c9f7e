"""The ledger components in ``deploy/components``: each renders into an overlay, every object valid against the
Kubernetes schemas; the PostgreSQL one mounts the Secret where its configuration reads the password and admits
only the agent to the database; the SQLite one keeps the ledger on a claim written by one replica at a time,
without a disruption budget that would block node drains."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from config.ledger import LedgerSettings
from tests.daemon.manifests import DEPLOY, KUBECTL, find, render
from tests.deploy.test_install_manifests import KUBERNETES_VERSIONS, _errors

pytestmark = [
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: it renders the kustomize overlays"),
    pytest.mark.xdist_group("kustomize"),
]


def with_component(tmp_path: Path, component: str) -> list[dict[str, Any]]:
    # kustomize takes only relative paths: an overlay beside the shipped ones, in a copy of deploy/.
    root = tmp_path / "deploy"
    shutil.copytree(DEPLOY, root)
    overlay = root / "overlays" / "ledger"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["../enforce"],
                "components": [f"../../components/{component}"],
            }
        )
    )
    objects = render("overlays/ledger", root=root)
    for version in KUBERNETES_VERSIONS:
        assert _errors(objects, version) == []
    return objects


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = find(objects, "Deployment", "leadtime")
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def test_the_postgresql_component_mounts_the_secret_its_configuration_reads(tmp_path: Path) -> None:
    objects = with_component(tmp_path, "postgresql-ledger")
    spec = pod_spec(objects)
    (volume,) = [v for v in spec["volumes"] if v["name"] == "ledger-credentials"]
    assert volume["secret"]["secretName"] == "leadtime-ledger"
    assert volume["secret"]["defaultMode"] & 0o040, "the agent's group (its fsGroup) must be able to read it"
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "ledger-credentials"]
    assert mount["readOnly"] is True
    raw = yaml.safe_load((DEPLOY / "components" / "postgresql-ledger" / "ledger-config.yaml").read_text())
    settings = LedgerSettings.model_validate(raw["ledger"])
    assert settings.backend == "postgresql" and settings.password_file is not None
    for path in (settings.password_file, settings.sslrootcert):
        assert path is not None and Path(path).parent == Path(mount["mountPath"])
    assert {Path(settings.password_file).name, Path(str(settings.sslrootcert)).name} == {"password", "ca.crt"}


def test_the_postgresql_component_admits_only_the_agent_to_the_database(tmp_path: Path) -> None:
    objects = with_component(tmp_path, "postgresql-ledger")
    (policy,) = find(objects, "NetworkPolicy", "leadtime-ledger-database")
    (rule,) = policy["spec"]["ingress"]
    (peer,) = rule["from"]
    agent_labels = find(objects, "Deployment", "leadtime")[0]["spec"]["template"]["metadata"]
    assert peer["podSelector"]["matchLabels"].items() <= agent_labels["labels"].items()
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "leadtime"}
    assert rule["ports"] == [{"protocol": "TCP", "port": 5432}]
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # the agent's own traffic is not restricted


def test_the_sqlite_component_keeps_the_ledger_on_a_claim_one_replica_writes(tmp_path: Path) -> None:
    objects = with_component(tmp_path, "sqlite-ledger-volume")
    (claim,) = find(objects, "PersistentVolumeClaim", "leadtime-ledger")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    spec = pod_spec(objects)
    (state,) = [v for v in spec["volumes"] if v["name"] == "state"]
    assert state == {"name": "state", "persistentVolumeClaim": {"claimName": "leadtime-ledger"}}
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "state"]
    (config_map,) = [o for o in find(objects, "ConfigMap") if o["metadata"]["name"].startswith("leadtime-config")]
    ledger_path = yaml.safe_load(config_map["data"]["config.yaml"])["ledger"]["path"]
    assert Path(ledger_path).parent == Path(mount["mountPath"])
    (deployment,) = find(objects, "Deployment", "leadtime")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # the old pod lets go of the file first
    (budget,) = find(objects, "PodDisruptionBudget", "leadtime")
    assert "minAvailable" not in budget["spec"] and budget["spec"]["maxUnavailable"] == 1
