"""What a live daemon needs in its settings, checked before anything connects (``leadtime run`` and
``leadtime validate-config --for run``). Settings only: no client is imported here, so the check runs where the
``daemon`` extra is not installed (``agent.extras``)."""

from __future__ import annotations

from config.rules import shared_ledger_problems
from config.schema import Settings
from models import ConfigError, ConfigProblem, PoolKind

_REHEARSE = (
    "or rehearse without any cloud: leadtime run --replay TRACE (with daemon.leader_election.enabled: false where "
    "no Kubernetes API is reachable)"
)


def check_live_settings(settings: Settings, source: str) -> None:
    """The sections a live daemon needs; every one missing is reported at once (exit code 2)."""
    problems: list[ConfigProblem] = []
    if settings.prometheus is None:
        problems.append(
            ConfigProblem(
                "prometheus",
                f"leadtime run reads demand from Prometheus: add a prometheus section with its url, {_REHEARSE}",
            )
        )
    on_aws = settings.aws.pools if settings.aws is not None else frozenset()
    cloud_pools = [p.id for p in settings.pools if p.kind is not PoolKind.ON_PREM and p.id not in on_aws]
    if settings.cloud is None and cloud_pools:
        problems.append(
            ConfigProblem(
                "cloud",
                f"pools {', '.join(cloud_pools)} are changed through Google Cloud: add a cloud section with project, "
                f"location, cluster and a mapping for each pool, {_REHEARSE}",
            )
        )
    problems.extend(shared_ledger_problems(settings))
    if problems:
        raise ConfigError(source, problems)


def needs_kubernetes(settings: Settings) -> bool:
    """GKE node pools, GKE TPU slice groups and AWS node groups are drained through the Kubernetes API before they
    shrink."""
    on_aws = settings.aws is not None and bool(settings.aws.pools)
    cloud = settings.cloud
    return on_aws or (cloud is not None and bool(cloud.node_pools or cloud.tpu_slice_groups))
