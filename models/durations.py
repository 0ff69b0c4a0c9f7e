"""How durations read in reasons, reports and logs: ``10m``, ``1h30m``, ``45s`` rather than ``0:10:00``."""

from __future__ import annotations

from datetime import timedelta


def format_duration(delta: timedelta) -> str:
    """Short form for reports and logs: ``10m``, ``1h30m``, ``45s``."""
    total = round(delta.total_seconds())
    if total == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if total >= size:
            parts.append(f"{total // size}{unit}")
            total %= size
    return "".join(parts)
