"""The error hierarchy, in one place.

Errors are named for what the caller should do about them:

    LeadtimeError
    ├── ConfigError              a person must fix the configuration (lists every problem with its key path)
    ├── TraceError               a recorded demand trace cannot be used as given
    ├── MetricsUnavailable       no trustworthy observation: hold the pools, alert, try again next tick
    ├── MetricSourceUnavailable  the metric source cannot be reached, or has data for no demand class at all:
    │                            a one-shot command has nothing to say (exit 3); fix the source or its query
    ├── ForecastError            a model could not produce a usable forecast: fall back, record why
    ├── LedgerUnavailable        the spend ledger cannot be opened or written: fix its storage; spend is unknown
    ├── StateUnavailable         the planner memory cannot be read or written now: keep it in memory, try again
    │   └── StateConflict            someone wrote it since it was read: read again before the next write
    ├── StateDocumentUnreadable  the saved planner memory is not one this version can read: start from empty
    ├── KubernetesUnconfigured   no way to reach a Kubernetes API was found: configure one
    ├── KubernetesApiError       a Kubernetes API call failed (translated in one place, ``kube.errors``)
    │   ├── KubernetesConflict       409: written by someone else since it was read: read again
    │   ├── KubernetesNotFound       404: the object does not exist (yet)
    │   ├── KubernetesForbidden      401/403: the credentials or the RBAC role do not allow it
    │   ├── KubernetesThrottled      429: not now (rate limit, disruption budget); ``retry_after`` when given
    │   ├── KubernetesUnavailable    5xx, a timeout or no answer at all: try again later
    │   └── KubernetesInvalid        400/422 (and any other refusal): the request cannot succeed as sent
    ├── BacktestInputError       the backtest was asked for something it cannot do: change the request
    └── ActuatorError            something went wrong while reading or changing infrastructure
        ├── TransientActuatorError   retry later (HTTP 429/5xx, PDB-blocked eviction, operation conflict)
        ├── CapacityUnavailable      back off this pool, try the next eligible one (stockout, quota)
        └── PermanentActuatorError   alert a human, stop touching this pool (bad credentials, not found)

Adapters translate vendor exceptions into these at the boundary; nothing above the adapters imports an SDK
exception type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from models.durations import format_duration


class LeadtimeError(Exception):
    """Base of every error leadtime raises on purpose."""


@dataclass(frozen=True)
class ConfigProblem:
    """One problem in a configuration file: where it is and what is wrong."""

    key_path: str
    message: str

    def __str__(self) -> str:
        return f"{self.key_path}: {self.message}" if self.key_path else self.message


class ConfigError(LeadtimeError):
    """The configuration cannot be used. Carries one problem per offending key."""

    def __init__(self, source: str, problems: list[ConfigProblem]) -> None:
        self.source = source
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid configuration {source}:\n{lines}")


class TraceError(LeadtimeError):
    """A recorded demand trace is missing, malformed or does not cover what was asked."""


class MetricsUnavailable(LeadtimeError):
    """Observations for a demand class are missing, empty, NaN or stale. Never read this as zero demand."""

    def __init__(self, demand_class: str, reason: str, query: str | None = None) -> None:
        self.demand_class = demand_class
        self.reason = reason
        self.query = query
        where = f" (query: {query})" if query else ""
        super().__init__(f"metrics unavailable for demand class {demand_class!r}: {reason}{where}")


class MalformedAnswer(MetricsUnavailable):
    """The source answered, but with something that is not data: a sample value that is not a number, a result that
    is not of the documented shape. Told apart from a read that failed (no connection, no answer in time, a server
    error), which the next read may well get through: here the source did answer, and an older value of the class
    is no stand-in for nonsense."""


class PrometheusServerFailure(MetricsUnavailable):
    """A Prometheus request failed for a reason of the server's, not of the class's query: no connection, no answer
    in time, a server error (5xx) or 429 after the retries."""


class AnswerCutOff(TimeoutError):
    """A read of Prometheus' answer that the read deadline ended: no socket read is started once it has passed, and
    none waits past it. ``answering``: the answer's status line and headers had come (its body was coming in);
    ``received``: the bytes of the answer read by then."""

    def __init__(self, answering: bool, received: int) -> None:
        super().__init__(f"the read deadline passed with {received} bytes of the answer read")
        self.answering, self.received = answering, received


class NotPrometheusJson(ValueError):
    """A 200 answer whose body is not JSON: not Prometheus' HTTP API but, most often, the sign-in page of a proxy in
    front of it (oauth2-proxy redirects a request without credentials to one) or a page at a wrong base URL. Carries
    the answer's ``Content-Type``, its HTML ``<title>`` if any, and where a redirect led (without its query, which
    may hold the request's)."""

    def __init__(self, content_type: str, title: str, redirected_to: str) -> None:
        super().__init__(f"not JSON: {content_type or 'no Content-Type'}")
        self.content_type, self.title, self.redirected_to = content_type, title, redirected_to


class MetricSourceUnavailable(LeadtimeError):
    """The metric source cannot be reached, or answers with no usable data for any demand class. A one-shot
    command (``recommend``, ``simulate --source prometheus``) stops with this instead of reporting zero."""


class ForecastError(LeadtimeError):
    """A forecaster could not produce a usable forecast for a series."""


class RefitReadCut(Exception):
    """A refit's history read did not finish within its deadline: the models in use are kept."""

    @classmethod
    def of(cls, history: timedelta, deadline: timedelta, unread: Sequence[str], classes: int) -> RefitReadCut:
        listed = ", ".join(unread[:5]) + (", ..." if len(unread) > 5 else "")
        return cls(
            f"the refit's history read (forecast.history {format_duration(history)}) did not finish within "
            f"{format_duration(deadline)}, half of forecast.refit_interval: {len(unread)} of {classes} classes not "
            f"read ({listed}); the models in use are kept. Prometheus answers the range queries over forecast.history "
            "too slowly: check its load, or shorten forecast.history"
        )


class LedgerUnavailable(LeadtimeError):
    """The spend ledger cannot be opened, read or written (unwritable path, corrupt or foreign file)."""


class NoLedgerSchema(LedgerUnavailable):
    """A read-only ledger found no leadtime schema in the database: no daemon has written it yet."""


class BillingExportError(LeadtimeError):
    """A billing export cannot be imported; ``problems`` name each bad row's line and what is wrong with it."""

    SHOWN = 20  # problems listed before "and N more"

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        shown = "\n  ".join(self.problems[: self.SHOWN])
        more = f"\n  and {len(self.problems) - self.SHOWN} more" if len(self.problems) > self.SHOWN else ""
        super().__init__(f"{source}: {len(self.problems)} problem(s), nothing imported:\n  {shown}{more}")


class ActuatorError(LeadtimeError):
    """Reading or changing a pool failed."""

    def __init__(self, pool_id: str, message: str) -> None:
        self.pool_id = pool_id
        self.reason = message
        super().__init__(f"pool {pool_id!r}: {message}")


class TransientActuatorError(ActuatorError):
    """Try again later; the same request may succeed (rate limits, server errors, PDB-blocked evictions).
    ``maybe_applied`` says the request may have reached the cloud and be carried out all the same: no answer came in
    time (a read timeout, 504 or DEADLINE_EXCEEDED), the connection was lost once it was sent, or the server failed
    while handling it (500 or INTERNAL, 502, 503 or UNAVAILABLE); or an earlier write of the same change was accepted.
    False for a refusal of the request, where nothing was applied (a rate limit, another operation running, a
    conflict, credentials not had before sending, a write not sent): a release refused so is not going."""

    def __init__(self, pool_id: str, message: str, maybe_applied: bool = False) -> None:
        super().__init__(pool_id, message)
        self.maybe_applied = maybe_applied


class CapacityUnavailable(ActuatorError):
    """The provider has no capacity (stockout) or quota for this pool: back off it, use the next eligible pool.
    ``quota`` says the adapter read the refusal as a quota used up, which unlike a stockout does not clear by itself
    (only the adapter knows its provider's words for one), so the operator is told to have it raised."""

    def __init__(self, pool_id: str, message: str, quota: bool = False) -> None:
        super().__init__(pool_id, message)
        self.quota = quota


class PermanentActuatorError(ActuatorError):
    """Retrying will not help (credentials, permissions, missing resource): alert and stop touching the pool."""


class StateUnavailable(LeadtimeError):
    """The state store cannot be read or written now; keep the copy in memory and try again next tick."""


class StateConflict(StateUnavailable):
    """The document changed since it was last read (a stale version): read it again before the next write."""


class StateDocumentUnreadable(LeadtimeError):
    """The saved document is not a planner memory this version of the agent can read."""


class StateDocumentTooNew(StateUnavailable):
    """The saved document was written by a newer release (a rolling upgrade, a rollback): it is neither read nor
    overwritten, and a leader that meets it plans and acts on nothing until a release that reads it leads or the
    document is deleted."""


class KubernetesUnconfigured(LeadtimeError):
    """No way to reach a Kubernetes API was found."""


class KubernetesApiError(LeadtimeError):
    """A Kubernetes API call failed. ``status`` is the HTTP status, ``None`` when no answer came (connection
    refused or reset, timeout); ``reason`` the HTTP reason phrase (or the transport error); ``detail`` the body."""

    def __init__(self, status: int | None, reason: str, detail: str = "") -> None:
        self.status = status
        self.reason = reason
        self.detail = detail
        if status is None:
            super().__init__(f"Kubernetes API unreachable: {reason}")
        else:
            super().__init__(f"Kubernetes API answered {status} {reason}".strip())


class KubernetesConflict(KubernetesApiError):
    """409: the object changed since it was read (stale resourceVersion), or one of that name already exists."""


class KubernetesNotFound(KubernetesApiError):
    """404: the object (or its namespace) does not exist."""


class KubernetesForbidden(KubernetesApiError):
    """401 or 403: not authenticated, or the role does not grant this verb on this resource."""


class KubernetesThrottled(KubernetesApiError):
    """429: not now (API priority and fairness, or an eviction a PodDisruptionBudget does not allow yet).
    ``retry_after`` is the server's hint in seconds, ``None`` when it gave none."""

    def __init__(self, status: int | None, reason: str, detail: str = "", retry_after: float | None = None) -> None:
        super().__init__(status, reason, detail)
        self.retry_after = retry_after


class KubernetesUnavailable(KubernetesApiError):
    """5xx, a request timeout, or no answer at all (connection refused, reset, timed out): try again later."""


class KubernetesInvalid(KubernetesApiError):
    """400, 422 or another refusal of the request itself: sending it again as it is will not help."""


class BacktestInputError(LeadtimeError):
    """The backtest was asked for something it cannot do (bad time, horizon, quantile or model)."""
