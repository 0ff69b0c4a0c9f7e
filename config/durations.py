"""Human-friendly durations in configuration files: ``90s``, ``10m``, ``1h30m``, ``7d`` or plain seconds."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from models.durations import format_duration

__all__ = ["at_least_one_second", "format_duration", "parse_duration"]

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
# No setting needs more than ten years; beyond that a value is a typo (and far beyond, timedelta overflows).
MAX_DURATION = timedelta(days=3650)


def parse_duration(value: object) -> timedelta:
    """Parse a duration. Numbers are seconds; strings combine parts like ``1h30m``. Negative, infinite and longer
    than ``MAX_DURATION`` are refused."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError("expected a duration such as '10m' or a number of seconds, got a boolean")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if text.startswith("-"):
            raise ValueError(f"duration must not be negative, got {value!r}")
        pos, seconds = 0, 0.0
        for match in _PART.finditer(text):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
            pos = match.end()
        if pos != len(text) or not text:
            try:
                seconds = float(text)
            except ValueError:
                raise ValueError(
                    f"cannot read {value!r} as a duration; write e.g. '90s', '10m', '1h30m', '7d' or seconds"
                ) from None
    else:
        raise ValueError(f"expected a duration such as '10m' or a number of seconds, got {type(value).__name__}")
    if math.isnan(seconds):
        raise ValueError(f"duration must be a number of seconds, got {value!r}")
    if seconds < 0:
        raise ValueError(f"duration must not be negative, got {value!r}")
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"duration must be at most {MAX_DURATION.days} days, got {value!r}")
    return timedelta(seconds=seconds)


def at_least_one_second(delta: timedelta) -> timedelta:
    """For steps and intervals that divide time: zero or a fraction of a second is refused."""
    if delta < timedelta(seconds=1):
        raise ValueError(
            f"must be at least 1s, got {delta.total_seconds() * 1000:g}ms" if delta else "must be at least 1s, got 0s"
        )
    return delta
