"""What a live daemon needs in its settings, checked before anything connects (``leadtime run`` and
``leadtime validate-config --for run``). Settings only: no client is imported here, so the check runs where the
``daemon`` extra is not installed (``agent.extras``).

Leader election off is refused in a Kubernetes pod: nothing else stops two replicas (the shipped Deployment runs
two, a rolling update starts the new pod beside the old) from both planning and resizing the same pools. One
replica without election, replaced by stopping it first (``replicas: 1``, strategy ``Recreate``), is accepted when
the pod says so explicitly (``SINGLE_REPLICA_ENV``); a single replica is as well served by leaving election on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from config.rules import shared_ledger_problems
from config.schema import Settings
from models import ConfigError, ConfigProblem, PoolKind

SINGLE_REPLICA_ENV = "LEADTIME_SINGLE_REPLICA"
_IN_A_POD = "KUBERNETES_SERVICE_HOST"  # set by the kubelet in every container of a pod

_REHEARSE = (
    "or rehearse without any cloud: leadtime run --replay TRACE (with daemon.leader_election.enabled: false where "
    "no Kubernetes API is reachable)"
)


def check_live_settings(settings: Settings, source: str, environ: Mapping[str, str] = os.environ) -> None:
    """The sections a live daemon needs, and leader election in a pod; every problem is reported at once (exit
    code 2)."""
    problems: list[ConfigProblem] = []
    if unguarded_replicas(settings, environ):
        problems.append(
            ConfigProblem(
                "daemon.leader_election.enabled",
                f"leader election is off, and this runs in a Kubernetes pod ({_IN_A_POD} is set), where nothing then "
                "stops two replicas (the shipped Deployment runs 2, and a rolling update starts a new pod beside the "
                "old one) from both planning and resizing the same pools. Set daemon.leader_election.enabled: true (a "
                "single replica simply holds the Lease), or, for a Deployment with replicas: 1 and strategy Recreate, "
                f"say so explicitly with the environment variable {SINGLE_REPLICA_ENV}=true in the pod",
            )
        )
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


def election_off_note(settings: Settings, environ: Mapping[str, str] = os.environ) -> str | None:
    """Leader election off, checked outside a pod: what a pod will say of it (refused unless it declares itself the
    only replica). A note, not a problem: the same file is right for a workstation, and where it is meant to run is
    not in it. None when election is on, or in a pod (``check_live_settings`` judges it there)."""
    if settings.daemon.leader_election.enabled or environ.get(_IN_A_POD):
        return None
    return (
        "note: daemon.leader_election.enabled is false, which is fine on this machine but refused in a Kubernetes pod "
        f"unless the pod sets {SINGLE_REPLICA_ENV}=true (the shipped Deployment runs 2 replicas and does not): for "
        f"the cluster set it to true, or run one replica (replicas: 1, strategy Recreate) with {SINGLE_REPLICA_ENV}="
        "true in the pod"
    )


def in_a_pod_without_election(settings: Settings, environ: Mapping[str, str] = os.environ) -> bool:
    """Leader election is off and this runs in a Kubernetes pod."""
    return not settings.daemon.leader_election.enabled and bool(environ.get(_IN_A_POD))


def declared_single_replica(environ: Mapping[str, str] = os.environ) -> bool:
    """The pod says that it is the only replica (``LEADTIME_SINGLE_REPLICA=true``)."""
    return environ.get(SINGLE_REPLICA_ENV, "").strip().lower() in ("true", "1")


def unguarded_replicas(settings: Settings, environ: Mapping[str, str] = os.environ) -> bool:
    """In a pod without leader election and without the pod saying it is the only replica: refused."""
    return in_a_pod_without_election(settings, environ) and not declared_single_replica(environ)


def drained_through_kubernetes(settings: Settings) -> tuple[str, ...]:
    """The pools (in the order of the pools section) whose idle nodes are drained through the Kubernetes API before
    they shrink: GKE node pools, GKE TPU slice groups and AWS node groups."""
    drained = set(settings.aws.pools) if settings.aws is not None else set()
    if settings.cloud is not None:
        drained.update(m.pool for m in settings.cloud.node_pools)
        drained.update(m.pool for m in settings.cloud.tpu_slice_groups)
    return tuple(pool.id for pool in settings.pools if pool.id in drained)
