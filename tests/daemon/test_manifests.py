"""The deployment in ``deploy/``: both overlays render with ``kubectl kustomize`` into what an SRE expects, the
bundled config is valid, the RBAC is least-privilege and the image runs unprivileged."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.daemon.live_settings import check_live_settings
from config import settings_from_mapping
from tests.daemon.manifests import DEPLOY, KUBECTL, allowed, find, grants_for, render

pytestmark = [
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: it renders the kustomize overlays"),
    pytest.mark.xdist_group("kustomize"),
]


@pytest.fixture(scope="module", params=["dry-run", "enforce"])
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    mode = str(request.param)
    return mode, render(f"overlays/{mode}")


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = find(objects, "Deployment", "leadtime")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_every_object_lives_in_the_agent_namespace(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    kinds = {o["kind"] for o in objects}
    assert kinds >= {
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
        "ConfigMap", "Deployment", "Service", "PodDisruptionBudget",
    }  # fmt: skip
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    # the one exception: Events about nodes live in "default" (the API server accepts them nowhere else), so the
    # right to create and patch them is a Role there
    in_default = {("Role", "leadtime-node-events"), ("RoleBinding", "leadtime-node-events")}
    for obj in objects:
        if (obj["kind"], obj["metadata"]["name"]) in in_default:
            assert obj["metadata"]["namespace"] == "default"
            assert obj["kind"] == "RoleBinding" or obj["rules"] == [
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}
            ]
        elif obj["kind"] not in cluster_scoped:
            assert obj["metadata"]["namespace"] == "leadtime", obj["metadata"]["name"]


def test_deployment_runs_two_hardened_replicas_with_probes(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    mode, objects = rendered
    (deployment,) = find(objects, "Deployment", "leadtime")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    container = _container(objects)
    assert spec["replicas"] == 2
    assert pod["serviceAccountName"] == "leadtime"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"]["cpu"]
    assert container["resources"]["limits"]["memory"]
    assert container["args"][-1] == f"--mode={mode}"
    assert container["args"][1:4] == ["run", "--config", "/etc/leadtime/config.yaml"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    secret = env["LEADTIME_SLACK_WEBHOOK_URL"]["valueFrom"]["secretKeyRef"]
    assert secret == {"name": "leadtime-slack", "key": "webhook-url", "optional": True}
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/etc/leadtime", "/tmp"} <= mounts  # the only writable place besides the state dir is /tmp
    assert pod["terminationGracePeriodSeconds"] >= 60


def test_pdb_service_and_workload_identity(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    (pdb,) = find(objects, "PodDisruptionBudget")
    (deployment,) = find(objects, "Deployment", "leadtime")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (service,) = find(objects, "Service")
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    (account,) = find(objects, "ServiceAccount", "leadtime")
    assert account["metadata"]["annotations"]["iam.gke.io/gcp-service-account"].endswith(".iam.gserviceaccount.com")


def test_the_bundled_config_is_valid_and_matches_the_manifests(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    (config_map,) = [o for o in find(objects, "ConfigMap") if o["metadata"]["name"].startswith("leadtime-config")]
    settings = settings_from_mapping(yaml.safe_load(config_map["data"]["config.yaml"]), source="deploy config")
    container = _container(objects)
    assert settings.daemon.endpoints.port == container["ports"][0]["containerPort"]
    assert settings.daemon.leader_election.identity_env in {e["name"] for e in container["env"]}
    (role,) = find(objects, "Role", "leadtime-election")
    names = {n for rule in role["rules"] for n in rule.get("resourceNames", [])}
    assert names == {settings.daemon.leader_election.lease_name}
    (state_role,) = find(objects, "Role", "leadtime-state")
    state_names = {n for rule in state_role["rules"] for n in rule.get("resourceNames", [])}
    assert state_names == {settings.daemon.state.config_map_name}
    assert settings.daemon.state.config_map_namespace in (None, "leadtime")
    volumes = {v["name"]: v for v in find(objects, "Deployment")[0]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == config_map["metadata"]["name"]  # hashed: edits roll pods


def test_only_the_enforce_overlay_may_cordon_and_evict(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    mode, objects = rendered
    grants = grants_for(objects, "leadtime", "leadtime")
    may_write = [
        allowed(grants, "patch", "", "nodes", "", "gpu-1"),
        allowed(grants, "create", "", "pods/eviction", "team-a", "train-1"),
    ]
    assert may_write == ([True, True] if mode == "enforce" else [False, False])
    # both may read nodes and pods, hold their own Lease and record Events, and nothing more
    assert allowed(grants, "list", "", "pods", "team-a", "")
    assert allowed(grants, "update", "coordination.k8s.io", "leases", "leadtime", "leadtime")
    assert not allowed(grants, "update", "coordination.k8s.io", "leases", "kube-system", "leadtime")
    assert not allowed(grants, "update", "coordination.k8s.io", "leases", "leadtime", "other-lease")
    assert not allowed(grants, "get", "", "secrets", "leadtime", "leadtime-slack")
    # the planner memory's ConfigMap, and no other: never the agent's own configuration
    assert allowed(grants, "update", "", "configmaps", "leadtime", "leadtime-state")
    assert not allowed(grants, "update", "", "configmaps", "leadtime", "leadtime-config")
    assert not allowed(grants, "get", "", "configmaps", "kube-system", "leadtime-state")
    assert not allowed(grants, "delete", "", "configmaps", "leadtime", "leadtime-state")
    assert not allowed(grants, "delete", "", "pods", "team-a", "train-1")
    assert not allowed(grants, "delete", "", "nodes", "", "gpu-1")
    assert all("*" not in g.verbs | g.resources | g.api_groups for g in grants)


def test_the_service_monitor_component_renders(tmp_path: Path) -> None:
    tree = tmp_path / "deploy"
    shutil.copytree(DEPLOY, tree)
    overlay = tree / "overlays" / "monitored"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: ['../enforce']\ncomponents: ['../../components/service-monitor']\n"
    )
    objects = render("overlays/monitored", root=tree)
    (monitor,) = find(objects, "ServiceMonitor")
    assert monitor["metadata"]["namespace"] == "leadtime"
    assert monitor["spec"]["endpoints"][0]["port"] == "http"


def test_the_image_runs_unprivileged_without_writing_its_filesystem() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    final_stage = dockerfile.rsplit("\nFROM ", 1)[1]
    assert "\nUSER 10001:10001" in final_stage
    assert "PYTHONDONTWRITEBYTECODE=1" in final_stage
    assert 'ENTRYPOINT ["leadtime"]' in final_stage
    assert "/src" not in final_stage.split("COPY --from=build", 1)[1]  # only the built virtualenv is copied
    # The base image is pinned to a patch release (a digest can be added with --build-arg).
    assert re.search(r"^ARG PYTHON_IMAGE=python:\d+\.\d+\.\d+-slim-\w+$", dockerfile, re.MULTILINE)


def test_the_package_builds_from_exactly_what_the_image_copies(tmp_path: Path) -> None:
    """No container runtime here: the image's build stage is replayed on what its COPY lines name (plus the empty
    README.md it writes), so a file the build needs and the Dockerfile does not copy (say, the license file that
    pyproject.toml names) fails here, not in the image build."""
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    build_stage = dockerfile.split("\nFROM ", 2)[1]
    root, context = DEPLOY.parent, tmp_path / "src"
    context.mkdir()
    for line in build_stage.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            for source in line.split()[1:-1]:
                copy = shutil.copytree if (root / source).is_dir() else shutil.copy2
                copy(root / source, context / source)
    assert "touch README.md" in build_stage
    (context / "README.md").touch()
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp_path / "dist"), "."],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("leadtime-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "agent/cli.py" in names and "config/examples/helios-earth.yaml" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_bundled_config_has_what_a_live_daemon_needs(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    (config_map,) = [o for o in find(objects, "ConfigMap") if o["metadata"]["name"].startswith("leadtime-config")]
    settings = settings_from_mapping(yaml.safe_load(config_map["data"]["config.yaml"]), source="deploy config")
    check_live_settings(settings, "deploy config")  # leadtime run without --replay starts on it
    assert settings.cloud is not None and settings.cloud.endpoint is None  # real Google APIs, real credentials
    mapped = {m.pool for m in settings.cloud.node_pools} | {m.pool for m in settings.cloud.tpu_slice_groups}
    assert mapped == {p.id for p in settings.pools}
