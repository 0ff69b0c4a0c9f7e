"""``leadtime recommend``: what the agent would do now, and what it would cost or save, changing nothing.

Reads demand history from the configured Prometheus, fits the configured forecaster, reads the pools' current state
once (``PoolsReadOnce``: the document's rows and the tick's plan come from the same read) through the read side of
the actuators wrapped in ``DryRunActuator`` (so no write can reach a pool, by construction):
the adapters of the ``cloud`` and ``aws`` sections (``cloud_read_side``; a cloud pool none of them reads is refused as
unread), or else a simulated cluster holding ``--current-units`` (each pool's ``min_units`` without it;
``pool_state_source`` says which). Then it runs one tick of the agent loop at ``--at`` and writes ``report.html``,
``report.md`` and ``recommendation.json``: per pool the current and recommended units with the reason, per class the
forecast bands and lead time, spend against each budget, cost per day against the current capacity, and a backtest of
the forecaster over the history. The budgets are held to the month's spend so far, read from the configured ledger
without writing it (``agent.commands.recommend_ledger``). Every text in them is redacted (``models.redaction``): a
``user:password@`` in the Prometheus URL, or a token quoted by an error, is never written. Each budget's entry is
``agent.commands.recommend_budgets``'s, the warnings beside the plan ``agent.commands.recommend_warnings``'s, and the
rest of the document (pools, classes, groups, cost, backtest) ``agent.commands.recommend_document``'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from actuators.base import Actuator, unread_pools
from actuators.dry_run import DryRunActuator
from actuators.routing import RoutingActuator
from actuators.simulated import SimulatedCluster
from agent.commands.arguments import parse_timestamp
from agent.commands.recommend_budgets import budgets
from agent.commands.recommend_document import backtest_entry, recommendation_document
from agent.commands.recommend_drains import read_alerts, read_drains, unread_drains
from agent.commands.recommend_ledger import open_read_only
from agent.commands.recommend_warnings import (
    Check,
    assumed_units,
    failed_slices,
    node_alerts,
    onprem_short,
    onprem_unobserved,
    start_up_warnings,
)
from agent.loop import Agent, AgentParts, TickReport
from agent.notify import RecordingNotifier
from agent.observation import with_group_series
from agent.sources.onprem_capacity import PrometheusOnPremCapacity, onprem_queries
from agent.sources.prometheus import PrometheusSource, no_usable_data
from agent.sources.prometheus_queries import demand_queries
from agent.sources.resource_check import unknown_resources
from agent.strict_json import write_json
from config import load_settings
from config.prometheus import PrometheusSettings
from config.schema import Settings
from forecasting.factory import build_forecaster
from models import ActionResult, ActuatorError, ConfigError, ConfigProblem, LeadtimeError, PoolKind, PoolState
from models.clock import SimulatedClock, SystemClock
from models.redaction import redact_tree


def register(sub: Any) -> None:
    parser = sub.add_parser("recommend", help="dry run: write what the agent would do now, change nothing")
    parser.add_argument("--config", required=True, help="YAML configuration with a prometheus section")
    parser.add_argument("--out", required=True, help="directory for report.html, report.md, recommendation.json")
    parser.add_argument("--at", type=parse_timestamp, help="recommend as of this ISO-8601 time (default: now)")
    parser.add_argument(
        "--current-units",
        type=parse_units,
        default={},
        help="current units per pool as POOL=N[,POOL=N] (default: each pool's min_units); without this option the "
        "pools are read from the cloud when the configuration has a cloud or an aws section",
    )
    parser.set_defaults(handler=run)


def parse_units(text: str) -> dict[str, int]:
    units: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        pool, _, count = part.partition("=")
        if not pool or not count.isdigit():
            raise argparse.ArgumentTypeError(f"expected POOL=N[,POOL=N], got {part!r}")
        units[pool] = int(count)
    return units


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    at = args.at or SystemClock().now()
    unknown = sorted(set(args.current_units) - {p.id for p in settings.pools})
    if unknown:
        raise LeadtimeError(f"--current-units names unknown pool(s) {unknown}")
    if outside := _outside_bounds(settings, args.current_units):
        raise LeadtimeError(f"--current-units: {outside}")
    read_side: Actuator
    checks: Sequence[Check] = ()
    if (settings.cloud is not None or settings.aws is not None) and not args.current_units:
        (read_side, checks), state_source = cloud_parts(settings), "cloud"
    else:
        clock = SimulatedClock(at)
        read_side = SimulatedCluster(settings.pool_specs(), clock, initial_units=args.current_units)
        state_source = "--current-units" if args.current_units else "min_units"
    document = recommend(
        settings, args.config, Path(args.out), at, read_side, pool_state_source=state_source, checks=checks
    )
    cost = document["cost"]
    for warning in document["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    now = "now (assumed)" if state_source == "min_units" else "now"
    print(
        f"recommendation at {document['at']}: {cost['current_per_day_usd']:,.0f} USD/day {now}, "
        f"{cost['recommended_per_day_usd']:,.0f} USD/day recommended; wrote {args.out}/report.html, report.md, "
        "recommendation.json"
    )
    return 0


def cloud_read_side(settings: Settings) -> Actuator:
    """The pools of the ``cloud`` (GKE, Cloud TPU) and ``aws`` (EKS node groups, EC2 Auto Scaling groups) sections,
    read through the adapters the daemon runs (``agent.daemon.live``), each pool routed to its own, with the drains in
    progress on the pools the daemon drains read through its drainers as it takes them over
    (``agent.commands.recommend_drains``). Only read: ``recommend`` wraps them in ``DryRunActuator`` and gives them no
    drainer, so no write reaches a pool or a node."""
    return cloud_parts(settings)[0]


def cloud_parts(settings: Settings) -> tuple[Actuator, list[Check]]:
    """``cloud_read_side`` and the advisory checks the daemon runs once at start on the same adapters (the AWS
    groups' AZRebalance check, ``actuators.aws_wiring``), with what kept the drains in progress from being read: each
    only reads."""
    routes: dict[str, Actuator] = {}
    checks: list[Check] = []
    built = google = None
    if settings.aws is not None:
        from actuators.aws_wiring import build_aws_actuators  # the AWS SDK: only when AWS is read

        built = build_aws_actuators(settings.aws, SystemClock())
        routes |= built.routes
        checks += built.checks
    cloud = settings.cloud
    if cloud is not None:
        from actuators.cloud_tpu import queued_resource_waits
        from actuators.cloud_wiring import build_cloud_actuators  # cloud SDKs: only when the cloud is read

        google = build_cloud_actuators(cloud, SystemClock(), queued_resource_waits(settings))
        mapped = [m.pool for m in cloud.node_pools] + [m.pool for m in cloud.tpu_slice_groups]
        mapped += [m.pool for m in cloud.queued_resources]
        routes |= dict.fromkeys(mapped, google.router)
    pools = sorted(drained_pools(settings))
    read, told = read_drains(settings, pools, RoutingActuator(routes), google, built)
    return read, checks + told


def drained_pools(settings: Settings) -> frozenset[str]:
    """The pools the daemon shrinks only by draining their nodes, each with a drainer (``agent.daemon.live``): the
    GKE node pools and TPU slice groups of the ``cloud`` section, the EKS node groups and EC2 Auto Scaling groups of
    the ``aws`` section. Recommend gives its dry-run agent no drainer but plans with these, as the daemon does: a
    budget's hard stop ranks the units in flight of a drained pool busy (a drain takes a ready node, busy or not)
    and takes units in flight first only in the others (Cloud TPU queued resources, deleted by a size change)."""
    pools: list[str] = []
    if settings.cloud is not None:
        pools += [m.pool for m in settings.cloud.node_pools] + [m.pool for m in settings.cloud.tpu_slice_groups]
    if settings.aws is not None:
        pools += [m.pool for m in settings.aws.nodegroups] + [a.pool for a in settings.aws.auto_scaling_groups]
    return frozenset(pools)


def _outside_bounds(settings: Settings, units: Mapping[str, int]) -> str | None:
    """What is wrong with current units that a pool cannot have (outside its min_units..max_units), if any: a
    recommendation from a state the pool cannot be in would mislead."""
    problems = [
        f"{pool.id}={units[pool.id]} is outside the bounds of pool {pool.id!r}: {pool.min_units}..{pool.max_units} "
        "units (min_units..max_units)"
        for pool in settings.pools
        if pool.id in units and not pool.min_units <= units[pool.id] <= pool.max_units
    ]
    return "; ".join(problems) or None


def _onprem_capacity(prometheus: PrometheusSettings, settings: Settings) -> PrometheusOnPremCapacity | None:
    """What the daemon reads of the on-prem pools: the units of each that can take work, by its ``capacity_query``
    (a pool without one is planned on its ``max_units``, as the daemon plans it)."""
    if not onprem_queries(prometheus, settings.pool_specs()):
        return None
    return PrometheusOnPremCapacity.from_settings(prometheus, settings.pool_specs())


def recommend(
    settings: Settings,
    config_path: str,
    out: Path,
    at: datetime,
    read_side: Actuator,
    pool_state_source: str,
    source: PrometheusSource | None = None,
    checks: Sequence[Check] = (),
) -> dict[str, Any]:
    """One dry-run tick at ``at``; writes the three files into ``out`` and returns the JSON document. ``checks`` are
    the daemon's start-up checks of the pools read (``cloud_parts``): what they find is listed under warnings."""
    at = at.astimezone(UTC)
    prometheus = settings.prometheus
    if prometheus is None:
        raise ConfigError(
            config_path,
            [ConfigProblem("prometheus", "recommend reads Prometheus: add a prometheus section with its url")],
        )
    classes = settings.demand_class_models()
    source = source or PrometheusSource.from_settings(prometheus, demand_queries(classes, prometheus))
    source.probe()
    dry_run = DryRunActuator(PoolsReadOnce(read_side), SimulatedClock(at))
    states = {s.pool_id: s for s in dry_run.list_pools()}
    unread: dict[str, object] = dict(unread_pools(dry_run))
    for spec in settings.pool_specs():  # a cloud pool the read side has no adapter for is not read either
        if spec.kind is not PoolKind.ON_PREM and spec.pool_id not in states and spec.pool_id not in unread:
            unread[spec.pool_id] = "no mapping in the cloud: or aws: section reads it"
    if unread:
        # the daemon holds such a pool and plans the others; a recommendation for the others alone would read as
        # one for the whole fleet, so it is refused, saying what failed and how to go on
        failures = "; ".join(f"pool {pool!r}: {error}" for pool, error in sorted(unread.items()))
        raise LeadtimeError(
            f"cannot read the current state of {len(unread)} pool(s): {failures}. Fix the access named above, or "
            "give every pool's current units with --current-units (the cloud is then not read)"
        )
    with open_read_only(settings.ledger) as (ledger, month_to_date):
        agent = Agent(
            settings,
            AgentParts(
                source,
                build_forecaster(settings.forecast, settings.planning_horizon()),
                dry_run,
                ledger,
                RecordingNotifier(),
                onprem=_onprem_capacity(prometheus, settings),
                drained=drained_pools(settings),
            ),
            # the daemon's holder (its Lease): its reservations in the ledger are this deployment's, not the others'
            holder=settings.daemon.leader_election.lease_name,
        )
        history, history_problem = _history(source, agent, at)
        warnings = unknown_resources(source, classes, prometheus, at, settings.forecast.history)
        agent.fit_on(history, at)  # the history window is read once, for the fit and the backtest alike
        outlook = agent.observe(at)
        tick = agent.act(at, outlook)
        spends = agent.budget_watch.spend(at)  # what the tick planned on: nothing more is charged after it
    told = read_alerts(read_side)
    document = recommendation_document(
        config_path, at, agent, tick, states, pool_state_source, prometheus.url, outlook.onprem, told
    )
    document["ledger"] = month_to_date.as_json()
    document["budgets"] = budgets(agent, tick, spends, document["pools"], month_to_date, states)
    document["warnings"] = (
        warnings
        + [
            f"budget {b['name']}: spent this period is partial: {b['spend_partial']}"
            for b in document["budgets"]
            if b["spend_known"] and b["spend_partial"]
        ]
        + failed_slices(agent, states)
        + assumed_units(agent, pool_state_source)
        + onprem_unobserved(agent)
        + onprem_short(agent, tick)
        + node_alerts(told, unread_drains(read_side))
        + start_up_warnings(checks)
    )
    document["backtest"] = backtest_entry(agent, history, at, history_problem)
    document["dry_run"] = dry_run_entries(dry_run.recorded, tick)
    document = redact_tree(document)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LeadtimeError(f"cannot create output directory {out}: {exc}") from None
    write_json(out / "recommendation.json", document)
    # The chart shows each summed pool-group series with its own history next to its forecast.
    from agent.report.recommendation import write_recommendation_reports  # matplotlib: only when writing

    write_recommendation_reports(out, document, with_group_series(history, agent.groups), tick)
    return document


class PoolsReadOnce:
    """``inner``'s pools read once for the whole dry run: the document's rows, the tick's plan and its executor all
    see that read. Read again, a pool resized in between (by its daemon running beside the dry run, a person, the
    cloud's own autoscaler) would be shown at the units of one read and planned from those of another. Writes pass
    through (``recommend`` wraps this in ``DryRunActuator``: none reaches a pool)."""

    def __init__(self, inner: Actuator) -> None:
        self._inner = inner
        self._read: tuple[PoolState, ...] | None = None

    def list_pools(self) -> Sequence[PoolState]:
        if self._read is None:
            self._read = tuple(self._inner.list_pools())
        return self._read

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return unread_pools(self._inner)

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        return self._inner.resize(pool_id, to_units, key)


def dry_run_entries(recorded: Sequence[tuple[str, int, str]], tick: TickReport) -> list[dict[str, Any]]:
    """Each resize the dry-run tick recorded, at the target its plan set (``to_units``, as its key says). The executor
    sends a scale-up of a pool with idle nodes being drained as the units bought beyond those it takes back
    (``agent.executor_resizes``), and recommend's executor has no drainer to take them back: the figure it recorded
    held them back (22 for a plan of 2 -> 24 with 2 idle nodes being drained), where the daemon ends those drains
    and the pool serves the 24 planned. A resize no plan made (the removal of failed units) keeps its figure."""
    planned = {resize.key: resize.to_units for resize in tick.plan.resizes}
    return [{"pool_id": p, "to_units": planned.get(k, u), "key": k} for p, u, k in recorded]


def _history(source: PrometheusSource, agent: Agent, at: datetime) -> tuple[pd.DataFrame, str | None]:
    """The forecast history of every class; when no class has any, there is nothing to recommend."""
    start = at - agent.settings.forecast.history
    frame, missing = source.fetch_each(agent.classes, start, at, agent.step)
    if agent.classes and len(missing) == len(agent.classes):
        raise no_usable_data(source.url, missing, every_class=True)
    problem = "; ".join(str(exc) for exc in missing.values()) or None
    return frame, problem
