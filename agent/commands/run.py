"""``leadtime run --config FILE``: the in-cluster daemon.

Replicas elect a leader on a Lease; the leader runs the agent loop every tick; every replica refits its models,
serves ``/healthz``, ``/readyz`` and ``/metrics``, and stops cleanly on SIGTERM (the tick in progress finishes,
exit 0). ``--mode`` overrides ``daemon.mode`` (the kustomize overlays set it); ``dry-run`` writes nothing.

Live, the daemon reads demand from the ``prometheus`` section's server and changes the pools of the ``cloud``
section (GKE node pools, GKE TPU slice groups, Cloud TPU queued resources); GKE node pools shrink only by draining
idle nodes through the Kubernetes API. Alerts go to Slack when a webhook URL is configured, delivered from a
bounded queue on a thread of their own (a tick never waits on Slack; what is still queued at shutdown gets up to
``alerts.shutdown_flush_timeout``), else to the log only, one line per condition per ``alerts.dedup_window``; a line
at start says which, and why the log only, and ``leadtime_alerts_sink{sink}`` is 1 for the one in use.

``--replay TRACE`` rehearses the daemon without any cloud: a recorded demand trace stands in for live metrics
(shifted so that ``--replay-from`` is now, read at the trace's step) and a simulated cluster stands in for the
pools. The cluster starts with the units the first lead time's demand needs, is served each replayed step's
demand, and carries out the plan whatever the mode: a rehearsal touches no cloud, and a cluster that never moved
would show a daemon asking for the same units every tick, not what it would do. A rehearsal does not need Slack:
where the webhook URL cannot be read (``alerts.slack_webhook_url_file`` names a file mounted only in the pod), its
alerts go to the log, with a warning saying why, where a live start refuses the file.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agent.commands.arguments import parse_timestamp

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from agent.daemon.wiring import DaemonParts
    from agent.notify.base import Notifier
    from agent.notify.queued import QueuedNotifier
    from agent.simulation.window import SimulationWindow
    from agent.sources.trace import Trace
    from config.alerts import AlertSettings
    from config.schema import Settings
    from models.clock import Clock

log = logging.getLogger(__name__)


def register(sub: Any) -> None:
    parser = sub.add_parser("run", help="run the agent as a daemon (leader election, schedule, endpoints)")
    parser.add_argument("--config", required=True, help="YAML configuration")
    parser.add_argument("--mode", choices=["dry-run", "enforce"], help="override daemon.mode from the file")
    parser.add_argument("--replay", metavar="TRACE", help="rehearse: replay a demand CSV against a simulated cluster")
    parser.add_argument(
        "--replay-from", type=parse_timestamp, help="trace time that maps to now (default: trace start + history)"
    )
    parser.add_argument(
        "--fresh-ledger",
        action="store_true",
        help="start a new ledger in a zero-length ledger file (ledger.fresh_if_empty) instead of refusing it",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: the parser imports this module for every command, and the live parts (cloud
    # SDKs) are imported only when the daemon runs live.
    from prometheus_client import CollectorRegistry

    from agent.commands.validate_config import check_for
    from agent.daemon.identity import replica_identity
    from agent.daemon.live_settings import SINGLE_REPLICA_ENV, drained_through_kubernetes, in_a_pod_without_election
    from agent.daemon.wiring import assemble
    from agent.notify.origin import OriginNotifier, alert_origin
    from agent.notify.queued import AlertQueueCollector
    from config import load_settings
    from kube import KubernetesNeeds, kubernetes_api_client
    from models.clock import SystemClock

    settings = load_settings(args.config)
    if args.fresh_ledger:
        settings = settings.model_copy(update={"ledger": settings.ledger.model_copy(update={"fresh_if_empty": True})})
    mode = args.mode or settings.daemon.mode
    clock = SystemClock()
    live = not args.replay
    webhook_problem = None
    if live:
        # Before anything connects, validate-config --for run's own check: every problem at once, exit 2.
        check_for(settings, args.config, "run", os.environ, mode)
        if in_a_pod_without_election(settings, os.environ):  # and declared the only replica, or refused above
            log.warning(
                "leader election is off (%s=true): nothing stops a second replica from acting beside this one; keep "
                "the Deployment at replicas: 1 with strategy Recreate",
                SINGLE_REPLICA_ENV,
            )
    else:
        from agent.sources.trace import read_trace

        # before anything connects: a missing or broken trace is exit 2; the configured classes' series alone set
        # its step and grid, as in simulate
        trace = read_trace(args.replay, series=[c.series_id for c in settings.demand_class_models()])
        webhook_problem = rehearsal_webhook_problem(settings.alerts, os.environ, args.config)
        window = rehearsal_window(settings, trace, args.replay_from)  # and so is a start outside it
        settings, mode = rehearsal_settings(settings, window, mode)
    kube = None
    needs = KubernetesNeeds(
        settings.daemon.leader_election.enabled, drained_through_kubernetes(settings) if live else (), live=live
    )
    if needs.leader_election or needs.drained_pools:
        kube = kubernetes_api_client(settings.daemon.kubernetes, os.environ, needs)
    notifier, slack = alert_notifier(settings.alerts, clock, os.environ, webhook_problem)
    identity = replica_identity(settings.daemon.leader_election, os.environ)
    notifier = OriginNotifier(notifier, alert_origin(settings, mode, identity, None if live else args.replay))
    if live:
        from agent.daemon import live as live_wiring  # the cloud SDKs: imported only when the daemon runs live

        parts = live_wiring.live_parts(settings, args.config, clock, notifier, kube, CollectorRegistry())
    else:
        parts = rehearsal_parts(settings, clock, trace, window, notifier, identity)
        parts.kube = kube
    assembled = assemble(settings, mode, parts, os.environ)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per job run is noise to an operator
    export_alert_sink(assembled.metrics.registry, "log" if slack is None else "slack")
    if slack is not None:
        assembled.metrics.registry.register(AlertQueueCollector(slack))
    try:
        return assembled.runtime.run_until_signalled()
    finally:
        _close(slack, settings)


def _close(slack: QueuedNotifier | None, settings: Settings) -> None:
    """Deliver what is still queued, within the configured deadline (the lease has been handed over already)."""
    if slack is not None:
        slack.close(settings.alerts.shutdown_flush_timeout)


def alert_notifier(
    settings: AlertSettings, clock: Clock, environ: Mapping[str, str], rehearsal_problem: str | None = None
) -> tuple[Notifier, QueuedNotifier | None]:
    """Where the alerts go, said once at start: to Slack, behind its delivery queue (also returned, to be exported
    and closed), or, without a webhook URL, to the log only, one line per condition per ``dedup_window``.
    ``rehearsal_problem``: why a rehearsal cannot read the webhook URL (``rehearsal_webhook_problem``); its alerts
    then go to the log, with a warning saying why."""
    from agent.notify.log import LogNotifier
    from agent.notify.queued import queued_slack_notifier
    from agent.notify.slack import webhook_source

    if rehearsal_problem is not None:
        log.warning(
            "rehearsal: alerts go to the log only, not to Slack: %s. A rehearsal does not need Slack; leadtime run "
            "without --replay refuses this (check the file with leadtime validate-config --for run where it runs)",
            rehearsal_problem,
        )
        return LogNotifier(settings.dedup_window), None
    slack = queued_slack_notifier(settings, clock, environ)
    if slack is not None:
        log.info("alerts go to Slack, to the incoming webhook whose URL is in %s", webhook_source(settings))
        return slack, slack
    log.warning(
        "alerts go to the log only, not to Slack: no webhook URL in %s, which is unset or empty (set it and restart "
        "the agent to alert in Slack); one log line per condition per %s",
        webhook_source(settings),
        settings.dedup_window,
    )
    return LogNotifier(settings.dedup_window), None


def rehearsal_webhook_problem(settings: AlertSettings, environ: Mapping[str, str], source: str) -> str | None:
    """Why the webhook URL cannot be read (a file mounted only in the pod, on a workstation), or None. A rehearsal
    does not need Slack, so it is not refused for this: its alerts go to the log."""
    from agent.notify.webhook import webhook_url
    from models import ConfigError

    try:
        webhook_url(settings, environ, source)
    except ConfigError as exc:
        return "; ".join(str(problem) for problem in exc.problems)
    return None


def export_alert_sink(registry: CollectorRegistry, sink: str) -> None:
    """``leadtime_alerts_sink{sink}``: 1 for the sink in use (``slack`` or ``log``), 0 for the other."""
    from prometheus_client import Gauge

    gauge = Gauge(
        "leadtime_alerts_sink",
        "Where alerts go: 1 for the sink in use, 0 for the other; slack (an incoming webhook) or log (the agent's "
        "log only: no webhook URL was configured).",
        ["sink"],
        registry=registry,
    )
    for name in ("slack", "log"):
        gauge.labels(name).set(1 if name == sink else 0)


def replay_start(settings: Settings, trace: Trace, replay_from: datetime | None) -> datetime:
    """The trace time that maps to now: ``replay_from``, by default the trace's start plus the forecast history.
    One outside the trace is refused: every tick would find no demand and hold, saying only "no observed value"."""
    from models import LeadtimeError

    start = replay_from or trace.index[0].to_pydatetime() + settings.forecast.history
    first, last = trace.index[0].to_pydatetime(), trace.index[-1].to_pydatetime()
    if not first <= start <= last:
        given = "--replay-from" if replay_from is not None else "the trace's start plus forecast.history"
        raise LeadtimeError(
            f"{given} ({start.isoformat()}) is outside the trace, which runs from {first.isoformat()} to "
            f"{last.isoformat()}"
        )
    return start


def rehearsal_window(settings: Settings, trace: Trace, replay_from: datetime | None) -> SimulationWindow:
    """The demand a rehearsal replays: the trace from ``replay_start`` to its end, one column per demand class. A
    class with no value in it is refused, as ``simulate`` refuses it: each step is served only when every class has
    a value (unknown demand is not zero), so no step would be, and no unit would ever be seen idle."""
    from agent.simulation.window import select_window
    from models import TraceError

    start = replay_start(settings, trace, replay_from)
    try:
        return select_window(trace, settings.demand_class_models(), start, None)
    except TraceError as exc:
        given = "--replay-from" if replay_from is not None else "the trace's start plus forecast.history"
        raise TraceError(
            f"cannot rehearse from {given} ({start.isoformat()}) to the trace's end: {exc} (a rehearsal's window is "
            "set with --replay-from)"
        ) from None


REHEARSAL_LEASE_SUFFIX = "-rehearsal"  # the Lease a rehearsal elects its leader on, beside the daemon's own


def rehearsal_settings(settings: Settings, window: SimulationWindow, mode: str) -> tuple[Settings, str]:
    """The settings and mode a rehearsal runs with. The trace is read at its own step, as ``simulate`` reads it
    (``forecast.step`` is the spacing the daemon asks Prometheus for; a trace has only its own, and the trace
    source refuses any other). The mode is ``enforce``: the simulated cluster touches no cloud, and only a cluster
    that carries out the plan shows what the daemon would do (one held at its start shows the same scale-up asked
    for every tick, and a dry-run's shadow account would weigh the recommendations against that cluster, which
    nobody runs)."""
    from agent.commands.simulate import _at_trace_step

    if mode != "enforce":
        log.info(
            "rehearsal: the simulated cluster carries out the plan (mode enforce, not %s: it touches no cloud); "
            "there is no dry-run shadow account to compare it with",
            mode,
        )
    election = settings.daemon.leader_election
    if election.enabled:
        lease = f"{election.lease_name}{REHEARSAL_LEASE_SUFFIX}"
        log.warning(
            "rehearsal: leader election on Lease %s, not %s: a rehearsal must never hold the Lease a real daemon "
            "leads with (its planner memory stays in this process and it writes no decision Events)",
            lease,
            election.lease_name,
        )
        daemon = settings.daemon.model_copy(
            update={"leader_election": election.model_copy(update={"lease_name": lease})}
        )
        settings = settings.model_copy(update={"daemon": daemon})
    return _at_trace_step(settings, window), "enforce"


def rehearsal_parts(
    settings: Settings,
    clock: Clock,
    trace: Trace,
    window: SimulationWindow,
    notifier: Notifier,
    identity: str = "leadtime",
) -> DaemonParts:
    """The rehearsal's source and pools: the trace shifted so that the window's start is now, and the simulated
    cluster, started as the simulator starts it (``initial_units``) and served the window's demand as it comes. Its
    planner memory stays in the process and it writes no decision Events: a rehearsal that reaches a Kubernetes API
    (to rehearse leader election) must not put its simulated pools' memory in the state ConfigMap a real daemon
    resumes from, nor Events about them beside the real cluster's objects.

    Its ledger is the simulator's (``simulated_ledger``) on the window as replayed: every pool of a budget held at 0
    units from the start of the budget's month period, in the rehearsal's own time, until the rehearsal starts. The
    simulated pools had no spend before it, so the spend counted from there is whole; a bare ledger began at the
    first tick, and every monthly budget raised budget-ledger-incomplete (to the configured Slack channel, with
    ``leadtime_budget_spend_incomplete`` at 1) about a bill that does not exist."""
    from actuators import SimulatedCluster
    from agent.daemon.replay import RehearsalCluster, ReplayedDemand, ShiftedTraceSource
    from agent.daemon.wiring import DaemonParts
    from agent.simulation.assembly import simulated_ledger
    from agent.simulation.window import initial_units
    from agent.state import InMemoryStateStore

    pools, priority = settings.pool_specs(), settings.waiting_costs()
    start, limit = initial_units(window, pools, priority), settings.forecast.max_staleness  # as simulate's cluster
    cluster = SimulatedCluster(pools, clock, start, waiting_costs=priority, idle_pause_limit=limit)
    source = ShiftedTraceSource(trace, window.index[0].to_pydatetime(), clock.now())
    demand = ReplayedDemand(window.index, window.classes, window.demand, window.step, source.offset)
    return DaemonParts(
        source=source,
        actuator=RehearsalCluster(cluster, clock, demand),
        ledger=simulated_ledger(settings, replace(window, index=window.index + source.offset)),
        notifier=notifier,
        clock=clock,
        state=InMemoryStateStore(identity),
        decision_events=False,
    )
