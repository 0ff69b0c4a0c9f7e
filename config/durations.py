"""Human-friendly durations in configuration files: ``90s``, ``10m``, ``1h30m``, ``7d`` or plain seconds."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from models.durations import format_duration as rounded_duration

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


def format_duration(delta: timedelta) -> str:
    """A setting's duration as it is written back out (the settings' serializer, the configuration reference,
    messages naming a setting's value): ``10m``, ``1h30m``, ``45s`` as reports write them (``models.durations``),
    but a fraction of a second is kept, not rounded, so that the text reads back as the same value: ``500ms``,
    ``1.5s``, ``1m0.25s`` (a ``retry_period`` of 0.5s was written as ``0s``, one of 1.5s as ``2s``)."""
    micros = delta // timedelta(microseconds=1)
    whole, fraction = divmod(micros, 1_000_000)
    if not fraction or micros < 0:
        return rounded_duration(delta)
    if not whole:
        return f"{_decimal(fraction, 3)}ms"
    text = rounded_duration(timedelta(seconds=whole - whole % 60)) if whole >= 60 else ""
    return f"{text}{_decimal(whole % 60 * 1_000_000 + fraction, 6)}s"


def _decimal(value: int, places: int) -> str:
    """``value`` / 10**``places`` in decimal, exactly, with no trailing zeros."""
    integer, rest = divmod(value, 10**places)
    return f"{integer}.{rest:0{places}d}".rstrip("0").rstrip(".")


def at_least_one_second(delta: timedelta) -> timedelta:
    """For steps and intervals that divide time: zero or a fraction of a second is refused."""
    if delta < timedelta(seconds=1):
        raise ValueError(
            f"must be at least 1s, got {delta.total_seconds() * 1000:g}ms" if delta else "must be at least 1s, got 0s"
        )
    return delta
