"""Rendering the kustomize overlays in ``deploy/`` with ``kubectl kustomize`` and reading RBAC out of them."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUBECTL = shutil.which("kubectl")


def render(overlay: str, root: Path = DEPLOY) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    result = subprocess.run(
        [KUBECTL, "kustomize", str(root / overlay)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


@dataclass(frozen=True)
class Grant:
    """One RBAC rule bound to the agent's service account; ``namespace`` None means cluster-wide."""

    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    names: frozenset[str]
    namespace: str | None

    def allows(self, verb: str, group: str, resource: str, namespace: str, name: str) -> bool:
        return (
            (self.namespace is None or self.namespace == namespace)
            and ("*" in self.api_groups or group in self.api_groups)
            and ("*" in self.resources or resource in self.resources)
            and ("*" in self.verbs or verb in self.verbs)
            and (not self.names or name in self.names)
        )


def grants_for(objects: list[dict[str, Any]], account: str, account_namespace: str) -> list[Grant]:
    """Every rule of every (Cluster)Role bound to ``account``, as the API server's authorizer would see them."""

    def bound(binding: dict[str, Any]) -> bool:
        return any(
            s.get("kind") == "ServiceAccount" and s["name"] == account and s.get("namespace") == account_namespace
            for s in binding.get("subjects") or []
        )

    grants: list[Grant] = []
    for binding in find(objects, "ClusterRoleBinding") + find(objects, "RoleBinding"):
        if not bound(binding):
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        roles = find(objects, ref["kind"], ref["name"])
        assert roles, f"{binding['kind']} {binding['metadata']['name']} refers to a missing {ref['kind']}"
        for rule in roles[0].get("rules") or []:
            grants.append(
                Grant(
                    frozenset(rule.get("apiGroups") or []),
                    frozenset(rule.get("resources") or []),
                    frozenset(rule.get("verbs") or []),
                    frozenset(rule.get("resourceNames") or []),
                    scope,
                )
            )
    return grants


def allowed(grants: list[Grant], verb: str, group: str, resource: str, namespace: str, name: str) -> bool:
    return any(g.allows(verb, group, resource, namespace, name) for g in grants)
