"""The install manifests in ``deploy/install``: exactly what ``kubectl kustomize`` renders from each overlay today
(a test fails when they drift: run ``make manifests``), and every object valid against the Kubernetes OpenAPI
schemas, checked offline and strictly (unknown fields are errors), for the oldest and newest versions we support."""

from __future__ import annotations

import copy
import re
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.daemon.manifests import DEPLOY, KUBECTL, find, render

INSTALL = DEPLOY / "install"
INSTALL_DOC = DEPLOY.parent / "docs" / "install.md"
MODES = ("dry-run", "enforce")
# The agent's objects use only GA APIs (apps/v1, coordination/v1, policy/v1, rbac/v1, v1), served by every
# version GKE's release channels offer; check the oldest and a recent one.
KUBERNETES_VERSIONS = ("1.30.0", "1.34.0")


def _installed(mode: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((INSTALL / f"{mode}.yaml").read_text()) if doc]


def _errors(objects: list[dict[str, Any]], version: str) -> list[str]:
    errors = []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")
    return errors


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: it renders the kustomize overlays")
@pytest.mark.xdist_group("kustomize")
@pytest.mark.parametrize("mode", MODES)
def test_the_install_manifest_is_what_the_overlay_renders(mode: str) -> None:
    assert _installed(mode) == render(f"overlays/{mode}"), f"deploy/install/{mode}.yaml is stale: run `make manifests`"


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("mode", MODES)
def test_every_object_is_valid_against_the_kubernetes_schemas(mode: str, version: str) -> None:
    objects = _installed(mode)
    assert {o["kind"] for o in objects} >= {"Namespace", "Deployment", "ClusterRole", "Service", "ConfigMap"}
    assert _errors(objects, version) == []


def test_the_schema_check_catches_a_misspelt_field() -> None:
    objects = copy.deepcopy(_installed("enforce"))
    (deployment,) = find(objects, "Deployment", "leadtime")
    deployment["spec"]["template"]["spec"]["containers"][0]["resource"] = {"limits": {"cpu": "1"}}
    (errors,) = [_errors([deployment], KUBERNETES_VERSIONS[-1])]
    assert len(errors) == 1 and "resource" in errors[0]


def test_each_manifest_says_how_it_was_made_and_how_to_apply_it() -> None:
    for mode in MODES:
        head = (INSTALL / f"{mode}.yaml").read_text().splitlines()[:2]
        assert "make manifests" in head[0] and f"deploy/overlays/{mode}" in head[0]
        assert f"kubectl apply -f deploy/install/{mode}.yaml" in head[1]


def test_the_enforce_manifest_can_drain_and_the_dry_run_one_cannot() -> None:
    def can_evict(objects: list[dict[str, Any]]) -> bool:
        return any(
            "pods/eviction" in rule.get("resources", []) and "create" in rule.get("verbs", [])
            for role in find(objects, "ClusterRole")
            for rule in role.get("rules", [])
        )

    assert can_evict(_installed("enforce"))
    assert not can_evict(_installed("dry-run"))


def test_the_manifests_are_listed_in_the_docs() -> None:
    install_doc = INSTALL_DOC.read_text()
    for mode in MODES:
        assert f"deploy/install/{mode}.yaml" in install_doc


def test_the_configmap_the_docs_load_is_the_one_the_deployment_mounts() -> None:
    """docs/install.md loads the configuration with `kubectl create configmap NAME`, and each manifest's header
    names the ConfigMap to load: the Deployment must mount that very name (a generated name with a content-hash
    suffix would leave the loaded configuration unread), and the docs restart the Deployment after loading it."""
    install_doc = INSTALL_DOC.read_text()
    loads = re.findall(r"kubectl -n leadtime create configmap (\S+) --from-file=config\.yaml=", install_doc)
    assert loads, "docs/install.md no longer shows how to load the configuration"
    (name,) = set(loads)
    after_load = install_doc.split(f"create configmap {name}", 1)[1].split("```", 1)[0]
    assert "kubectl -n leadtime rollout restart deployment/leadtime" in after_load
    for mode in MODES:
        objects = _installed(mode)
        (deployment,) = find(objects, "Deployment", "leadtime")
        pod = deployment["spec"]["template"]["spec"]
        (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == "/etc/leadtime"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert volume["configMap"]["name"] == name, (
            f"{mode}: the Deployment mounts another ConfigMap than the docs load"
        )
        (config_map,) = find(objects, "ConfigMap", name)
        assert "config.yaml" in config_map["data"]
        header = (INSTALL / f"{mode}.yaml").read_text().splitlines()[1]
        assert f"ConfigMap {name} " in header
