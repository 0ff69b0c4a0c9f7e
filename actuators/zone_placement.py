"""Where the nodes of a pool that spans zones go: how many per zone on a scale-up, which zones lose nodes on a
scale-down. Pure functions of the per-zone counts; the GKE adapter carries the result out one zone at a time.

New nodes go one by one to the open zone with the fewest (first listed on a tie), so the pool stays balanced the way
GKE's ``BALANCED`` location policy aims for. Removed nodes come one by one from the zone with the most (last listed
on a tie).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def spread(targets: Mapping[str, int], open_zones: Sequence[str], add: int) -> dict[str, int]:
    """The new per-zone targets after adding ``add`` nodes to ``open_zones`` (other zones keep theirs; none is added
    without an open zone)."""
    placed = dict(targets)
    for _ in range(add if open_zones else 0):
        zone = min(open_zones, key=lambda z: placed[z])  # min keeps the first of equals
        placed[zone] += 1
    return placed


def shrink_order(targets: Mapping[str, int], removable: Mapping[str, int], remove: int) -> list[str]:
    """The zone of each node to remove, in order: ``remove`` times the zone with the most nodes that still has a
    removable one (``removable`` per zone)."""
    left, room = dict(targets), dict(removable)
    order: list[str] = []
    for _ in range(remove):
        candidates = [z for z in left if room.get(z, 0) > 0]
        if not candidates:
            break
        zone = max(reversed(candidates), key=lambda z: left[z])  # max keeps the first of equals: the last zone
        left[zone] -= 1
        room[zone] -= 1
        order.append(zone)
    return order
