"""The example configuration the install manifests ship (``deploy/base/config.yaml``) cannot act: its
``cloud.project`` is the placeholder ``PROJECT_ID``, which is no Google Cloud project ID (those are lowercase), and
an enforce agent refuses to start on it. Applying an install manifest puts the example back into the ConfigMap
``leadtime-config`` and rolls the Deployment before the user's configuration is loaded again (docs/install.md):
without this, an enforce agent would start on the example's pools until then."""

from __future__ import annotations

from config.schema import Settings
from models import ConfigError, ConfigProblem

PLACEHOLDER_PROJECT = "PROJECT_ID"


def refuse_example_in_enforce(settings: Settings, mode: str, source: str) -> None:
    """Raise ConfigError (exit 2) for an enforce agent whose configuration is still the shipped example's."""
    if mode != "enforce" or settings.cloud is None or settings.cloud.project != PLACEHOLDER_PROJECT:
        return
    raise ConfigError(
        source,
        [
            ConfigProblem(
                "cloud.project",
                f"is {PLACEHOLDER_PROJECT!r}, the placeholder of the example configuration the install manifests "
                "ship: an enforce agent does not act on the example. Load your configuration into the ConfigMap "
                "leadtime-config and restart the Deployment (docs/install.md, step 3: kubectl -n leadtime create "
                "configmap leadtime-config --from-file=config.yaml=my-config.yaml --dry-run=client -o yaml | "
                "kubectl apply -f -, then kubectl -n leadtime rollout restart deployment/leadtime)",
            )
        ],
    )
