"""Budget ledger settings: where spend is persisted and when a silence between observations is a gap.

The PostgreSQL password is a secret and never appears in the configuration file: it is read from the environment
variable named here, or from a mounted file (a Kubernetes Secret volume) whose path is named here.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from config.fields import Duration, Section

SslMode = Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]
_LABEL = r"^[a-z][a-z0-9_-]{0,62}$"  # a Google Cloud label key


class BillingSettings(Section):
    """How rows of a Cloud Billing export are matched to pools (``leadtime ledger import-billing``): by the value
    of the label ``label`` (GKE puts the node pool's name in ``goog-k8s-node-pool-name`` on its nodes' VMs),
    looked up in ``pools`` (pool id -> label value; a value equal to a pool's id matches that pool too), else by
    ``resource_prefixes`` (pool id -> prefix of the detailed export's resource name). Rows whose ``cluster_label``
    names another cluster than ``cluster`` (unset: ``cloud.cluster``, when there is a ``cloud`` section) are not
    matched; rows without that label (Cloud TPU VMs) are. With no cluster known, a pool whose rows name several
    clusters is refused: node pools are often named alike in staging and production."""

    label: str = Field(default="goog-k8s-node-pool-name", pattern=_LABEL)
    cluster_label: str = Field(default="goog-k8s-cluster-name", pattern=_LABEL)
    cluster: str | None = Field(default=None, min_length=1)
    pools: dict[str, str] = Field(default_factory=dict)
    resource_prefixes: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_matches(self) -> Self:
        values = list(self.pools.values())
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise ValueError(f"billing.pools maps the label value(s) {', '.join(repeated)} to more than one pool")
        empty = sorted(pool for pool, prefix in self.resource_prefixes.items() if not prefix)
        if empty:
            raise ValueError(f"billing.resource_prefixes: empty prefix for pool(s) {', '.join(empty)}")
        return self


class LedgerSettings(Section):
    """``backend: sqlite`` (the default) keeps spend in the file at ``path`` so it survives restarts; ``memory``
    is for simulations; ``postgresql`` keeps it in the database at ``url``, shared by every agent that names it.
    An interval between two observations of a pool longer than ``gap_after`` (and than one and a half ticks: a
    simulation ticks at its trace's step) is a gap: the larger of the
    capacities seen on either side of it is charged for all of it. A zero-length ledger file is refused (its spend
    is gone) unless ``fresh_if_empty`` says to start a new ledger in it. ``shared_file`` says every replica of
    the daemon mounts the same SQLite file: only the leader writes it, the standbys read it read-only."""

    backend: Literal["sqlite", "memory", "postgresql"] = "sqlite"
    path: str = Field(default="leadtime-ledger.sqlite", min_length=1)
    fresh_if_empty: bool = False
    shared_file: bool = False
    url: str | None = Field(default=None, min_length=1)
    password_env: str = Field(default="LEADTIME_LEDGER_PASSWORD", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    password_file: str | None = Field(default=None, min_length=1)
    sslmode: SslMode = "prefer"
    sslrootcert: str | None = Field(default=None, min_length=1)
    connect_timeout: Duration = timedelta(seconds=10)
    gap_after: Duration = timedelta(minutes=5)
    reservation_ttl: Duration = timedelta(hours=1)
    retention: Duration | None = timedelta(days=400)
    billing: BillingSettings = Field(default_factory=BillingSettings)

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError("must start with postgresql://")
        if parts.password is not None:
            raise ValueError(
                "must not hold a password: put it in the environment variable named by password_env "
                "or in the file named by password_file"
            )
        if not parts.hostname:
            raise ValueError("must name the database host: postgresql://USER@HOST:PORT/DATABASE")
        return url

    @model_validator(mode="after")
    def _check_backend(self) -> Self:
        if self.backend != "postgresql" and self.url is not None:
            raise ValueError(f"url is set but backend is {self.backend}: set backend: postgresql to use it")
        if self.shared_file and self.backend != "sqlite":
            raise ValueError(f"shared_file is for a SQLite ledger file, but backend is {self.backend}")
        if self.backend == "postgresql" and self.url is None:
            raise ValueError("backend postgresql needs url: postgresql://USER@HOST:PORT/DATABASE")
        if self.reservation_ttl < timedelta(minutes=1):
            raise ValueError("reservation_ttl must be at least 1m")
        if self.connect_timeout < timedelta(seconds=1):
            raise ValueError("connect_timeout must be at least 1s")
        if self.retention is not None and self.retention < timedelta(days=64):
            raise ValueError(
                "retention must be at least 64d (the current and the previous month whole in any time zone), "
                "or null to keep all of it"
            )
        return self
