"""From where a reader counts another agent's reservation (``agent.ledger.reservations.carried``).

A reservation is counted from where its pools' recorded spend ends, not from its span's start. An agent records its
spend at the start of its tick and replaces its standing reservation (from then on) at the end of it; a reader in
between found the tick recorded and the old reservation still counting it from its own start, and counted the tick
twice (8 units for one 5-minute tick: 5.33 USD). Its pools are those its holder names (``named_pools``); where
they end (``recorded_to``) is the earliest of their newest entries' ends, so that a pool its agent could not read
(its spend not recorded since) is still counted from where its record stops.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

_HELD = " (units held of "  # ``agent.ledger.reservations.StandingHolder.label``
_SCALE_UP = " (scale-up of "  # ``agent.ledger.reservations.StandingHolder.scale_up_label``


def named_pools(holder: str) -> tuple[str, ...]:
    """The pools a reservation's holder names: a deployment's standing reservation names its pools, a scale-up its
    pool (``agent.ledger.reservations.StandingHolder``); any other holder names none."""
    if not holder.endswith(")"):
        return ()
    _, held, pools = holder[:-1].rpartition(_HELD)
    if held:
        return tuple(p for p in pools.split(", ") if p)
    _, up, pool = holder[:-1].rpartition(_SCALE_UP)
    pool_id, to, units = pool.rpartition(" to ")
    return (pool_id,) if up and to and units.isdigit() and pool_id else ()


def recorded_to(pools: tuple[str, ...], ends: Mapping[str, datetime]) -> datetime | None:
    """Where the recorded spend of ``pools`` ends (``ends``: each pool's newest entry's end): the earliest of those
    recorded; ``None`` if none is."""
    known = [ends[p] for p in pools if p in ends]
    return min(known) if known else None


def newest_ends(ledger: object, pools: Sequence[str]) -> dict[str, datetime]:
    """Where each pool's recorded spend ends in ``ledger`` (an in-process ledger: its ``last_entry``), of the pools
    it has entries of."""
    last = getattr(ledger, "last_entry", None)
    if last is None:
        return {}
    return {p: entry.end for p in pools if (entry := last(p)) is not None}
