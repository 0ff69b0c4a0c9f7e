"""Settings of the in-cluster daemon (``leadtime run``): mode, endpoints, leader election, Kubernetes API, the
ConfigMap that keeps the planner memory, jobs.

Durations follow the rest of the schema (``15s``, ``1h``). The replica's identity is read from the environment
variable named by ``leader_election.identity_env`` (the Deployment sets it from the pod name), never from the file.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal, Self

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

from config.durations import at_least_one_second, format_duration, parse_duration
from config.fields import NumbersOnly

# The same duration type as in ``config.schema``; defined here so this module does not import the schema that
# imports it.
Duration = Annotated[timedelta, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)]


class Section(NumbersOnly):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class EndpointSettings(Section):
    """The one HTTP server of a replica: ``/healthz``, ``/readyz`` and ``/metrics``."""

    bind_address: str = "0.0.0.0"  # the pod's probes and the metrics scrape come from outside
    port: int = Field(default=8080, ge=0, le=65535)
    # /readyz fails when the last successful tick is older than this; unset means three tick intervals.
    ready_max_tick_age: Duration | None = None
    # /healthz fails while one tick has been running longer than this (a wedged thread: the kubelet restarts the
    # container, its lease lapses and the standby takes over); unset means ten tick intervals, at least 10m.
    live_max_tick_duration: Duration | None = None


# Each attempt of the leader is a read and a write of the Lease; at 500ms that is 4 requests a second, within the
# 5 a second client-go's default client is allowed (rest.DefaultQPS). 10ms sent 165 a second to a local API server.
MIN_RETRY_PERIOD = timedelta(milliseconds=500)
# The time limit of a cloud write (``write_limit``): below a second, a resize or a deletion fails before it is answered.
MIN_WRITE_LIMIT = timedelta(seconds=1)


def _seconds(delta: timedelta) -> str:
    """A duration in seconds, fractions kept (``format_duration`` rounds them away)."""
    return f"{delta.total_seconds():g}s"


class LeaderElectionSettings(Section):
    """A coordination.k8s.io Lease decides which replica plans and acts.

    A leader stops acting once ``renew_deadline`` has passed since its last successful renewal; a standby takes
    the lease only after it has seen the same holder record unchanged for ``lease_duration``. The deadline must
    be shorter than the lease so the two windows never overlap.
    """

    enabled: bool = True
    lease_name: str = Field(default="leadtime", min_length=1)
    # Unset: the namespace the pod runs in (POD_NAMESPACE, else the service account's namespace file).
    lease_namespace: str | None = None
    lease_duration: Duration = timedelta(seconds=15)
    renew_deadline: Duration = timedelta(seconds=10)
    retry_period: Duration = timedelta(seconds=2)
    identity_env: str = "POD_NAME"

    def write_limit(self) -> timedelta:
        """The time limit of each cloud write of the leader, which is sent only while this much leadership is left
        (``agent.daemon.guard``): at most ``lease_duration - renew_deadline``, so that a write the cloud applies up
        to that much after the limit still lands before a standby can take over, and at most ``renew_deadline -
        retry_period``, so that a leader renewing on time always has it (with a margin longer than that, no write
        would ever be sent)."""
        return min(self.lease_duration - self.renew_deadline, self.renew_deadline - self.retry_period)

    @field_validator("retry_period")
    @classmethod
    def _retry_period_spares_the_api_server(cls, value: timedelta) -> timedelta:
        if value < MIN_RETRY_PERIOD:
            raise ValueError(
                f"must be at least {_seconds(MIN_RETRY_PERIOD)}, got {_seconds(value)}: each attempt of a leader reads "
                "and writes the Lease, two requests, so a shorter period sends the API server more than 4 requests "
                "a second from each replica (client-go's default client allows 5)"
            )
        return value

    @model_validator(mode="after")
    def _deadline_inside_lease(self) -> Self:
        if self.renew_deadline >= self.lease_duration:
            raise ValueError("renew_deadline must be shorter than lease_duration, or two replicas could both act")
        if self.retry_period >= self.renew_deadline:
            raise ValueError("retry_period must be shorter than renew_deadline, or a leader could never renew")
        for longer, shorter in (("lease_duration", "renew_deadline"), ("renew_deadline", "retry_period")):
            gap = getattr(self, longer) - getattr(self, shorter)
            if gap < MIN_WRITE_LIMIT:
                raise ValueError(
                    f"{longer} - {shorter} ({_seconds(getattr(self, longer))} - {_seconds(getattr(self, shorter))} = "
                    f"{_seconds(gap)}) must be at least {_seconds(MIN_WRITE_LIMIT)}: the shorter of "
                    "lease_duration - renew_deadline and renew_deadline - retry_period is the time limit of every "
                    "cloud write of the leader, and a write given less than a second times out before most clouds "
                    "answer"
                )
        return self


class KubernetesApiSettings(Section):
    """How the daemon reaches the Kubernetes API."""

    # Set: called with no credentials (a local test server), even in a pod. Unset: in-cluster
    # configuration when running in a pod, else the local kubeconfig.
    api_url: str | None = None
    # Every call is bounded, so a hung connection can never hold up leadership decisions. At least a second: the
    # Kubernetes client applies no timeout at all when given 0.
    request_timeout: Annotated[Duration, AfterValidator(at_least_one_second)] = timedelta(seconds=5)


class StateSettings(Section):
    """Where the planner's memory (recent changes, back-offs after a stockout, blocked pools) is kept so that a
    restarted replica, or the replica that takes over, continues with it: one ConfigMap, written by the leader.
    Used whenever the daemon reaches the Kubernetes API; without it the memory lives in the process only."""

    config_map_name: str = Field(default="leadtime-state", min_length=1, max_length=253)
    # Unset: the Lease's namespace.
    config_map_namespace: str | None = None


class DaemonSettings(Section):
    mode: Literal["dry-run", "enforce"] = "dry-run"
    endpoints: EndpointSettings = EndpointSettings()
    leader_election: LeaderElectionSettings = LeaderElectionSettings()
    kubernetes: KubernetesApiSettings = KubernetesApiSettings()
    state: StateSettings = StateSettings()
    # A tick that could not start within this grace of its slot is dropped, never run late in a burst. At least a
    # second: the scheduler takes whole seconds, so 0 or a fraction was run as 1s, not as written.
    misfire_grace: Annotated[Duration, AfterValidator(at_least_one_second)] = timedelta(seconds=30)
    # The daily report is sent at this UTC time of day (HH:MM).
    daily_report_at: str = Field(default="08:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")

    @model_validator(mode="after")
    def _kubernetes_writes_end_inside_the_lease(self) -> Self:
        """The leader checks that it leads before each Kubernetes write of a drain (a cordon, an eviction), up to its
        renew deadline; a standby takes over no earlier than ``lease_duration`` after the last renewal. A write sent
        just before the deadline ends inside the lease only if its timeout fits in the gap. (A cloud write's time
        limit is at most that gap, and it is sent only while the leadership left covers it: ``write_limit``.)"""
        election = self.leader_election
        gap = election.lease_duration - election.renew_deadline
        if election.enabled and self.kubernetes.request_timeout > gap:
            raise ValueError(
                f"daemon.kubernetes.request_timeout ({format_duration(self.kubernetes.request_timeout)}) must fit in "
                f"daemon.leader_election.lease_duration - daemon.leader_election.renew_deadline "
                f"({format_duration(election.lease_duration)} - {format_duration(election.renew_deadline)} = "
                f"{format_duration(gap)}): a drain's write sent just before the leader's renew deadline could still "
                "be on its way when a standby takes over; shorten the timeout, or lengthen lease_duration"
            )
        return self

    def ready_bound(self, tick_interval: timedelta) -> timedelta:
        return self.endpoints.ready_max_tick_age or 3 * tick_interval

    def live_bound(self, tick_interval: timedelta) -> timedelta:
        return self.endpoints.live_max_tick_duration or max(10 * tick_interval, timedelta(minutes=10))
