"""``leadtime export-trace``: the cluster's own demand history from Prometheus, through the configured queries,
as a trace CSV for offline use (``simulate --trace``) and for sharing. Gaps stay gaps (an empty ``y``)."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta
from typing import Any

from agent.commands.arguments import parse_span, parse_timestamp
from models.durations import format_duration

DEFAULT_EXPORT_SPAN = "14d"


def register(sub: Any) -> None:
    parser = sub.add_parser("export-trace", help="write the demand history in Prometheus as a trace CSV")
    parser.add_argument("--config", required=True, help="YAML configuration with a prometheus section")
    parser.add_argument("--out", required=True, help="CSV file to write (gzipped when it ends in .gz)")
    parser.add_argument(
        "--since",
        type=parse_span,
        help=f"export this much history before --end (default {DEFAULT_EXPORT_SPAN}; not with --start)",
    )
    parser.add_argument("--start", type=parse_timestamp, help="start, ISO-8601 (instead of --since, not with it)")
    parser.add_argument("--end", type=parse_timestamp, help="end, ISO-8601 (default: now)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.commands.simulate import prometheus_range  # the parser imports this module: nothing heavy above
    from agent.sources.prometheus_history import prometheus_source, read_history
    from agent.sources.trace import write_trace
    from config import load_settings
    from models import LeadtimeError

    if args.since is not None and args.start is not None:  # the start is either given or counted back from --end
        raise LeadtimeError(
            "export-trace: give either --since or --start, not both (--since counts the start back from --end)"
        )
    settings = load_settings(args.config)
    start, end = prometheus_range(settings, args.start, args.end, args.since or parse_span(DEFAULT_EXPORT_SPAN))
    if (short := _short_range(args, start, end, settings.forecast.step)) is not None:
        raise LeadtimeError(short)
    history = read_history(settings, prometheus_source(settings, args.config, reader="export-trace"), start, end)
    rows = write_trace(history.trace, args.out)
    trace = history.trace
    print(
        f"wrote {args.out}: {len(trace.series)} demand classes, {len(trace.index)} steps of "
        f"{int(trace.step.total_seconds())} s from {start.isoformat()} to {end.isoformat()} ({rows} rows)"
    )
    return 0


def _short_range(args: argparse.Namespace, start: datetime, end: datetime, step: timedelta) -> str | None:
    """Why the range holds fewer than two steps of ``forecast.step`` (a trace needs two), naming the flag that set
    it; None when it holds enough. ``--since 3`` is 3 seconds: the unit is easy to leave out."""
    from agent.sources.prometheus_samples import step_grid  # pandas: the parser imports this module

    if len(step_grid(start, end, step)) >= 2:
        return None
    if args.start is not None:
        given = "--start .. --end"
    else:
        given = f"--since {format_duration(end - start)} (a number without a unit is seconds)"
    return (
        f"export-trace: the range {given}, {start.isoformat()} .. {end.isoformat()}, holds fewer than two steps of "
        f"forecast.step ({format_duration(step)}): give a longer range, e.g. --since {DEFAULT_EXPORT_SPAN}"
    )
