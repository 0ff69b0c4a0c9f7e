"""Where the nodes of a pool that spans zones go: how many per zone on a scale-up, which zones lose nodes on a
scale-down. Pure functions of the per-zone counts; the GKE adapter carries the result out one zone at a time.

New nodes go one by one to the open zone with the fewest (first listed on a tie), up to each zone's bound, so the
pool stays balanced the way GKE's ``BALANCED`` location policy aims for. Removed nodes come one by one from the zone
with the most (last listed on a tie).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def spread(
    targets: Mapping[str, int], open_zones: Sequence[str], add: int, zone_max: int | None = None
) -> dict[str, int]:
    """The new per-zone targets after adding up to ``add`` nodes to ``open_zones`` (other zones keep theirs); fewer
    are added when every open zone reaches ``zone_max``."""
    placed = dict(targets)
    for _ in range(add):
        room = [z for z in open_zones if zone_max is None or placed[z] < zone_max]
        if not room:
            break
        zone = min(room, key=lambda z: placed[z])  # min keeps the first of equals
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
