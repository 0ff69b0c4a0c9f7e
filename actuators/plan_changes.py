"""The refusal of a drained pool's resize: one wording for every adapter whose units go only through their drains.

A pool whose units a drainer removes (a GKE node pool, an AWS group, a TPU slice group, each built ``drained``)
never shrinks by a resize. A resize below what the pool holds as read now, once its failed units are removed, was
planned on an older read (a failed unit came up after all, the group grew, a job landed on a slice counted failed):
it is rejected with nothing else removed, and the next tick plans again.
"""

from __future__ import annotations


def changed_since_plan(target: int, to_units: int, unit: str, removed: str = "", verb: str = "removed") -> str:
    """Why a drained pool's resize to ``to_units`` was refused: it holds ``target`` units now, more than that.
    ``unit`` names one unit ("node", "slice"), ``verb`` what a drain does to it ("removed", "deleted"); what was
    removed first (the failed units), if anything, leads."""
    detail = (
        f"pool changed since the plan: it holds {_count(target, unit)}, more than the {to_units} asked, and its "
        f"{unit}s are {verb} only by their drains; nothing else is {verb}, re-planning next tick"
    )
    return f"{removed}; {detail}" if removed else detail


def _count(number: int, unit: str) -> str:
    return f"{number} {unit}" if number == 1 else f"{number} {unit}s"
