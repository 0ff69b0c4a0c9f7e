"""Argument types shared by several commands. Kept light: the parser imports it for every command."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from config.durations import parse_duration


def parse_timestamp(text: str) -> datetime:
    """ISO-8601 with or without an offset; without one it is read as UTC."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO-8601 timestamp (e.g. 2020-05-08T00:00+08:00)"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def parse_span(text: str) -> timedelta:
    try:
        span = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if span <= timedelta(0):
        raise argparse.ArgumentTypeError(f"{text!r}: the span must be positive, e.g. 14d")
    return span
