"""Peak resident memory of this process, for the benchmarks' reports."""

from __future__ import annotations

import resource


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
