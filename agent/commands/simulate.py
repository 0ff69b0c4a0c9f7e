"""``leadtime simulate``: replay a recorded trace, or the cluster's own history in Prometheus (``--source
prometheus``), through every policy and write results and a report. From Prometheus, pools with a
``capacity_query`` add an ``actual`` row: what they really ran, billed and served the same way.

The results document (and the report drawn from it) is redacted: the configuration it records may hold a
``prometheus.url`` with credentials."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agent.commands.arguments import parse_span, parse_timestamp
from agent.planning import resolve_service_levels
from agent.simulation import select_window
from agent.simulation.equal_service import SERVICE_LEVELS, run_and_compare
from agent.simulation.forecast_models import forecast_models
from agent.simulation.headline import BINDING_ALERTS
from agent.simulation.policies import AGENT_POLICIES, POLICIES
from agent.simulation.results import results_document
from agent.simulation.runner import Simulation
from agent.simulation.window import (
    DEFAULT_HISTORY,
    STATIC_NEEDS_HISTORY,
    SimulationWindow,
    gap_warning,
    has_static_history,
    outage_note,
)
from agent.sources.trace import Trace, read_trace
from agent.strict_json import write_json
from config import load_settings
from config.schema import ForecastSettings, Settings
from models import LeadtimeError, TraceError
from models.clock import SystemClock
from models.durations import format_duration
from models.redaction import redact_tree

if TYPE_CHECKING:
    from agent.sources.prometheus_history import ClusterHistory

log = logging.getLogger(__name__)

DEFAULT_TRACE = "data/helios-earth/demand_5min.csv.gz"
DEFAULT_SPAN = timedelta(days=7)
# Under the as-run table, where its rows left different shares of demand unserved: their costs are of different
# service (the one that serves more buys more capacity for it), so they are not what leadtime saves.
# Stand-ins for the report's marks on a stdout that cannot write them, told apart as the marks are.
ASCII_MARKS = {"‡": "[*]", "†": "[+]"}


def register(sub: Any) -> None:
    parser = sub.add_parser("simulate", help="replay a demand trace through the agent and baseline policies")
    parser.add_argument("--config", required=True, help="YAML configuration (pools, classes, planner)")
    parser.add_argument("--trace", help=f"long-format demand CSV (default {DEFAULT_TRACE})")
    parser.add_argument(
        "--source",
        choices=("trace", "prometheus"),
        default="trace",
        help="where demand comes from: the --trace file (default) or the configured Prometheus queries",
    )
    parser.add_argument(
        "--since",
        type=parse_span,
        help="with --source prometheus: simulate this much history before --end (default 7d), e.g. 14d",
    )
    parser.add_argument(
        "--start", type=parse_timestamp, help="window start, ISO-8601 (default: trace start + 7d, or --end - --since)"
    )
    parser.add_argument(
        "--end", type=parse_timestamp, help="window end, ISO-8601 (default: end of the trace, or now from Prometheus)"
    )
    parser.add_argument("--policy", default=",".join(POLICIES), type=parse_policies, help="comma-separated")
    parser.add_argument("--out", required=True, help="directory for results.json and report.html")
    parser.add_argument(
        "--equal-service",
        default="0.005,0.001",
        type=parse_targets,
        help="unserved-demand targets at which to compare what the same service costs ('none' to skip)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run)


def parse_policies(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown policy {unknown or text!r}; choose from {', '.join(POLICIES)}")
    return names


def parse_targets(text: str) -> list[float]:
    if text.strip().lower() in ("", "none"):
        return []
    try:
        targets = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected fractions such as 0.005,0.001 or 'none'") from None
    if any(not 0.0 < t < 1.0 for t in targets):
        raise argparse.ArgumentTypeError(f"{text!r}: each target is a fraction of demand in (0, 1)")
    return targets


def run(args: argparse.Namespace) -> int:
    # Imported here, not at the top (the parser imports this module for every command): the report draws with
    # matplotlib, and the actual row reads Prometheus.
    from tqdm import tqdm

    from agent.report.simulation import write_simulation_report
    from agent.simulation.actual import actual_note, actual_run

    settings = load_settings(args.config)
    out = Path(args.out)
    _check_out(out)  # before the run, which takes minutes: an --out that cannot be written would waste it
    history, trace, start, end = _demand(settings, args)
    window = select_window(trace, settings.demand_class_models(), start, end)
    settings = _at_trace_step(settings, window)
    _check_static(window, args.policy)  # before the forecasting, which takes minutes
    if (gaps := gap_warning(window)) is not None:  # collector outages included: a figure covers only the rest
        log.warning("%s", gaps, extra={"gap_steps": len(window.index) - int(window.observed.sum())})
    elif (outage := outage_note(window)) is not None:
        log.info("%s", outage)
    compare = bool(args.equal_service) and {"forecast", "reactive"} <= set(args.policy)
    total = len(window.index) * len(set(args.policy) & set(AGENT_POLICIES))
    with tqdm(total=total, desc="forecasting", unit="tick", disable=args.no_progress, file=sys.stderr) as bar:
        # an agent fits its models before its first tick: on the demo that is the first half-minute, without it
        # the bar would sit at zero with no word of why
        bar.set_postfix_str("fitting the models on the history before the window")

        def advance(ticks: int) -> None:
            if bar.postfix:
                bar.set_postfix_str("", refresh=False)
            bar.update(ticks)

        session = Simulation(settings, trace, window, SERVICE_LEVELS if compare else (), progress=advance)
        session.prepare(args.policy, compare_decisions=True)
    steps = len(args.policy) + compare
    with tqdm(total=steps, desc="simulating", unit="run", disable=args.no_progress, file=sys.stderr) as bar:
        runs, comparison = run_and_compare(
            session, args.policy, args.equal_service if compare else (), on_done=lambda _: bar.update(1)
        )
    actual = actual_run(settings, history, window) if history is not None else None
    if actual is not None:
        runs["actual"] = actual
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LeadtimeError(f"cannot create output directory {out}: {exc}") from None
    decisions = session.decision_changes() if "forecast" in args.policy else None
    models = None
    if "forecast" in args.policy:
        levels = resolve_service_levels(settings.demand_class_models(), settings.pool_specs(), settings.planner)
        models = forecast_models(session.outlooks("forecast"), levels)
    document = results_document(settings, args.config, trace, window, runs, comparison, decisions, models)
    if history is not None:
        document["actual"] = actual_note(settings, history, window)
    document = redact_tree(document)
    write_json(out / "results.json", document)
    write_simulation_report(out / "report.html", document, window, runs, settings)
    _print_table(document)
    if history is not None and document["actual"]["missing"]:
        print(f"no actual row: {document['actual']['missing']}")
    print(f"wrote {out / 'results.json'} and {out / 'report.html'}")
    return 0


def _check_static(window: SimulationWindow, policies: list[str]) -> None:
    """Refuse the static policy on a window without history before it, offering the other policies asked for."""
    if "static" not in policies or has_static_history(window):
        return
    others = [p for p in policies if p != "static"]
    hint = f", or leave the static policy out: --policy {','.join(others)}" if others else ""
    raise TraceError(f"{STATIC_NEEDS_HISTORY} (--start){hint}")


def _check_out(out: Path) -> None:
    """Refuse an output directory that could not be created or written, without creating anything (a run that
    fails for another reason leaves nothing behind)."""
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise LeadtimeError(f"cannot create output directory {out}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise LeadtimeError(f"cannot create output directory {out}: {existing} is not writable")


def _demand(
    settings: Settings, args: argparse.Namespace
) -> tuple[ClusterHistory | None, Trace, datetime | None, datetime | None]:
    """The demand to replay (with the Prometheus history it came from, if it did) and the window asked for."""
    if args.source == "prometheus":
        if args.trace is not None:
            raise LeadtimeError(
                "--trace and --source prometheus are two sources of demand: give one (drop --trace to read "
                "Prometheus, or drop --source prometheus to replay the file)"
            )
        if args.start is not None and args.since is not None:
            raise LeadtimeError("give either --start or --since, not both")
        history, start, end = _from_prometheus(settings, args)
        return history, history.trace, start, end
    if args.since is not None:
        raise LeadtimeError("--since reads Prometheus history: add --source prometheus (or use --start/--end)")
    if args.trace is None and not Path(DEFAULT_TRACE).is_file():
        raise LeadtimeError(
            f"no --trace given, and the bundled trace {DEFAULT_TRACE} is not under the current directory: run from "
            "the repository's checkout, or give --trace FILE"
        )
    # Only the configured classes' series set the trace's step and grid: another series in the file is not read.
    used = [c.series_id for c in settings.demand_class_models()]
    return None, read_trace(args.trace or DEFAULT_TRACE, series=used), args.start, args.end


def _at_trace_step(settings: Settings, window: SimulationWindow) -> Settings:
    """The settings with ``forecast.step`` set to the trace's step: a trace is replayed at its own spacing (the
    daemon's ``forecast.step`` is the spacing it asks Prometheus for). A different step set in the configuration
    is said, not silently dropped.

    ``prometheus.max_staleness`` is raised to that step where it is shorter, as loading requires of a configuration
    (it must be at least one forecast step): the settings a run records (``results.json``) then load back. A
    staleness limit set in the configuration and raised so is said too.

    ``forecast.history`` is checked again at the trace's step: loading checked it at ``forecast.step`` only, and the
    calibration takes more history at a longer step (3h at 5m, 7h at 15m). A history too short there is refused
    (``LeadtimeError``), as loading refuses it: replayed, every class would be forecast as its bare last value."""
    if window.step == settings.forecast.step:
        return settings
    if "step" in settings.forecast.model_fields_set:
        log.warning(
            "forecast.step is %s in the configuration but the trace's step is %s: simulating at the trace's step",
            format_duration(settings.forecast.step),
            format_duration(window.step),
        )
    update: dict[str, Any] = {"forecast": _forecast_at(settings.forecast, window.step)}
    prometheus = settings.prometheus
    if prometheus is not None and prometheus.max_staleness < window.step:
        if "max_staleness" in prometheus.model_fields_set:
            log.warning(
                "prometheus.max_staleness is %s in the configuration but the trace's step is %s: simulating with "
                "%s, as it must be at least one forecast step",
                format_duration(prometheus.max_staleness),
                format_duration(window.step),
                format_duration(window.step),
            )
        update["prometheus"] = prometheus.model_copy(update={"max_staleness": window.step})
    return settings.model_copy(update=update)


def _forecast_at(forecast: ForecastSettings, step: timedelta) -> ForecastSettings:
    """``forecast`` at ``step``, validated as loading validates it (``model_copy`` alone validates nothing)."""
    fields = {**forecast.model_dump(), "step": step}
    try:
        with warnings.catch_warnings():  # a model whose meaning changed was told so when the file loaded
            warnings.simplefilter("ignore", FutureWarning)
            return ForecastSettings.model_validate(fields)
    except ValidationError as exc:
        history = format_duration(forecast.history)
        said = (str(error["msg"]).removeprefix("Value error, ") for error in exc.errors())
        why = "; ".join(text.removeprefix(f"history {history} is too short: ") for text in said)
        raise LeadtimeError(
            f"forecast.history {history} is too short for the trace, whose step is {format_duration(step)} (a trace "
            f"is replayed at its own step, not at forecast.step {format_duration(forecast.step)}): {why}"
        ) from None


def _from_prometheus(settings: Settings, args: argparse.Namespace) -> tuple[ClusterHistory, datetime, datetime]:
    """The window asked for, and the history read for it: the window plus what came before it (at least the
    forecaster's history), so that the static policy and the forecasters see what they would have seen."""
    from agent.sources.prometheus_history import prometheus_source, read_history

    start, end = prometheus_range(settings, args.start, args.end, args.since or DEFAULT_SPAN)
    before = max(DEFAULT_HISTORY, settings.forecast.history)
    source = prometheus_source(settings, args.config)
    return read_history(settings, source, start - before, end), start, end


def prometheus_range(
    settings: Settings, start: datetime | None, end: datetime | None, since: timedelta
) -> tuple[datetime, datetime]:
    """[start, end): ``end`` defaults to now (at a whole step), ``start`` to ``end - since``."""
    end = end or _floor(SystemClock().now(), settings.forecast.step)
    start = start or end - since
    if start >= end:
        raise LeadtimeError(f"empty window: start {start.isoformat()} is not before end {end.isoformat()}")
    return start, end


def _floor(when: datetime, step: timedelta) -> datetime:
    seconds = step.total_seconds()
    return datetime.fromtimestamp(when.timestamp() // seconds * seconds, UTC)


def _print_table(document: dict[str, Any]) -> None:
    """The summary: the headline the report leads with (its lead sentence and what its marks mean), each policy as
    run, then what the same service costs."""
    from agent.report.headline import headline_lines

    if lines := headline_lines(document):
        # its marks (‡, †) are not ASCII: on a stdout that cannot write them, a "?" rather than an error, the
        # results being written already
        print(_writable("\n".join(lines)), end="\n\n")
    print(f"{'policy':<10} {'cost USD':>12} {'accel-h':>10} {'unserved':>9} {'util':>6} {'actions':>8}")
    for name, row in document["policies"].items():
        print(
            f"{name:<10} {row['cost_usd']:>12,.0f} {row['accelerator_hours']:>10,.0f} "
            f"{row['unserved_fraction']:>9.4%} {row['utilization']:>6.1%} {row['scale_actions']:>8}"
        )
    if line := _as_run_line(document):
        print(line)
    steps = document.get("window", {}).get("steps")
    for name, row in document["policies"].items():
        if line := _held_line(name, row, steps):
            print(line)
    for target, rows in document.get("equal_service", {}).items():
        costs = ", ".join(_figure(name, row, float(target)) for name, row in rows.items())
        print(f"same service ({float(target):.1%} unserved): {costs} USD")
        for name, row in rows.items():
            if row.get("cost_usd") is None:
                print(f"  {name} n/a: {_unreached(row)}")
            elif row.get("note"):
                print(f"  {name}: {row['note']}")


def _writable(text: str) -> str:
    """``text`` as stdout can write it: the marks (‡, †) are not ASCII, and on a stdout that cannot write them each
    has its own stand-in (``ASCII_MARKS``), anything else a "?", rather than an error once the results are written."""
    encoding = sys.stdout.encoding or "utf-8"
    for mark, stand_in in ASCII_MARKS.items():
        try:
            mark.encode(encoding)
        except UnicodeEncodeError:
            text = text.replace(mark, stand_in)
    return text.encode(encoding, "replace").decode(encoding)


def _as_run_line(document: dict[str, Any]) -> str | None:
    """Under the as-run table, the runs that left another share of demand unserved than the forecast run (as shown):
    their costs are not the same service as its. None when every run left the same share, or there is no forecast
    run."""
    shown = {name: f"{row['unserved_fraction']:.4%}" for name, row in document["policies"].items()}
    if "forecast" not in shown:
        return None
    other = [name for name, share in shown.items() if share != shown["forecast"]]
    if not other:
        return None
    names = " and ".join([", ".join(other[:-1]), other[-1]] if len(other) > 1 else other)
    left = f"{names} left another share of demand unserved than forecast as run: not the same service"
    return left + ("; compare costs on the 'same service' lines below" if document.get("equal_service") else "")


def _figure(name: str, row: dict[str, Any], target: float) -> str:
    """A policy's equal-service cost, with its own share of demand unserved where that is not the target: the
    cheapest setting tried already left less unserved (its note says so), or the policy is not tuned (the oracle,
    as run)."""
    if row.get("cost_usd") is None:
        return f"{name} n/a"
    text = f"{name} {row['cost_usd']:,.0f}"
    share = row.get("unserved_fraction")
    if share is None or share == target:
        return text
    return text + f" ({share:.2%} unserved{'' if 'trials' in row else ', as run'})"


def _held_line(name: str, row: dict[str, Any], steps: int | None) -> str | None:
    """What a budget cap did to a policy's run: the steps it held the run back, the caps exceeded all the same
    and the alerts that stopped or trimmed scale-ups; None where no cap held it back."""
    held = int(row.get("budget_held_steps") or 0)
    if not held:
        return None
    line = f"{name}: held back by a budget cap at {held}" + (f" of {steps} steps" if steps else " steps")
    over = [_over(budget, usage) for budget, usage in (row.get("budgets") or {}).items() if usage.get("exceeded")]
    if over:
        line += f"; cap exceeded all the same: {', '.join(over)}"
    alerts = [f"{a['count']} {a['kind']}" for a in row.get("alerts_raised") or () if a["kind"] in BINDING_ALERTS]
    if alerts:
        line += f"; alerts: {', '.join(alerts)}"
    return line


def _over(budget: str, usage: dict[str, Any]) -> str:
    caps = []
    hourly, monthly = usage.get("hourly_cap_usd"), usage.get("monthly_cap_usd")
    if hourly is not None and usage["peak_hour_spent_usd"] > hourly:
        caps.append(f"hourly cap {hourly:,.2f} USD, {usage['peak_hour_spent_usd']:,.2f} spent in an hour")
    if monthly is not None and usage["peak_period_spent_usd"] > monthly:
        caps.append(f"monthly cap {monthly:,.2f} USD, {usage['peak_period_spent_usd']:,.2f} spent in the month")
    return f"{budget} ({'; '.join(caps)})" if caps else budget


def _unreached(row: dict[str, Any]) -> str:
    """Why an equal-service figure is missing: its note, the closest share of demand unserved a setting left and
    the most steps a budget cap held one of its trials back."""
    text = str(row.get("note") or "no figure")
    if row.get("unserved_fraction") is not None:
        text += f" (closest: {row['unserved_fraction']:.4%} unserved)"
    held = max((int(t.get("budget_held_steps") or 0) for t in row.get("trials") or ()), default=0)
    if held:
        text += f"; a budget cap held its trials back at up to {held} steps"
    return text
