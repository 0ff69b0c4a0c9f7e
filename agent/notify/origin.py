"""Which agent an alert comes from: its mode, the cluster it acts on and its replica, stamped on every alert it
sends (``AlertEvent.origin``), so that in a channel several agents share, a shadow (dry-run) agent's alert cannot be
read as the production agent's, nor one cluster's as another's. Slack shows it in each message's context line and
fallback text (``agent.notify.slack_message``).

``OriginNotifier`` wraps whichever notifier the agent sends to; the origin is not part of an alert's condition, so
de-duplication is unchanged."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import PurePath

from agent.notify.base import Flushable, Notifier
from config.schema import Settings
from models import AlertEvent


@dataclass(frozen=True)
class AlertOrigin:
    mode: str  # dry-run or enforce
    cluster: str  # what the agent acts on: "cluster <name>", a rehearsal's simulated cluster
    identity: str  # the replica (pod name, else host name)

    def __str__(self) -> str:
        return f"{self.mode} · {self.cluster} · replica {self.identity}"


def alert_origin(settings: Settings, mode: str, identity: str, replay: str | None = None) -> AlertOrigin:
    """The origin of a daemon's alerts: the cluster of its ``cloud`` section (``cloud.cluster``) and of its ``aws``
    section (the EKS cluster, else the region), or, for a rehearsal (``replay``: the trace), its simulated cluster."""
    if replay is not None:
        return AlertOrigin(mode, f"rehearsal of {PurePath(replay).name} (simulated cluster)", identity)
    where = []
    if settings.cloud is not None:
        where.append(f"cluster {settings.cloud.cluster}")
    if settings.aws is not None:
        aws = settings.aws
        where.append(f"EKS cluster {aws.cluster}" if aws.cluster else f"AWS {aws.region}")
    return AlertOrigin(mode, ", ".join(where) or "no cloud cluster", identity)


class OriginNotifier:
    """A notifier that stamps each alert with ``origin`` and hands it to ``inner``."""

    def __init__(self, inner: Notifier, origin: AlertOrigin) -> None:
        self.inner = inner
        self.origin = origin

    def notify(self, event: AlertEvent) -> bool:
        return self.inner.notify(replace(event, origin=str(self.origin)))

    def flush(self) -> int:
        return self.inner.flush() if isinstance(self.inner, Flushable) else 0
