"""The planner memory as a versioned JSON document, the form every state store keeps.

Version 1::

    {"version": 1, "saved_at": "...", "saved_by": "leadtime-0",
     "last_change": {"pool": {"at": "...", "direction": 1}},
     "backoff_until": {"pool": "..."},
     "backoff_reason": {"pool": "stockout"},
     "blocked": {"pool": "why"},
     "failing_since": {"pool": "..."},
     "last_failure": {"pool": "..."},
     "units_failing_since": {"pool": "..."},
     "units_failed_last": {"pool": "..."},
     "open_conditions": [{"kind": "stockout", "subject": "pool", "since": "...", "seen": "...",
                          "severity": "warning", "summary": "...", "gone": "...", "held": true,
                          "held_by": "..."}],
     "conditions_ended": [{"kind": "missing-data", "subject": "demand class x", "at": "..."}],
     "slices_short_since": {"pool": {"slice": {"since": "...", "seen": "...", "hosts": ["<instance id>"]}}},
     "scale_ups_waited": [{"pool": "pool", "asked_at": "...", "from_units": 0, "to_units": 3,
                           "found_in_flight": true, "judged_at": "..."}],
     "drains_settled": {"pool": {"<drain key>": "..."}},
     "day_counts": {"since": "...", "led": [["leadtime-0", "..."]], "led_before": 0,
                    "replicas": {"leadtime-0": {"actions": {"succeeded": 3}, "skips": {"cooldown": 40},
                                                "errors": {"MetricsUnavailable": 1}}}}}

Times are ISO 8601 in UTC. ``failing_since`` (since when a pool's changes keep failing) and ``last_failure`` (when
one of them last failed) may be absent: a release that does not know them reads the rest and saves without them;
without ``failing_since`` the count starts again at the next failure, and a pool in ``failing_since`` without a
``last_failure`` is taken to have last failed when its count began. ``units_failing_since`` and
``units_failed_last`` (since when, and when last, a pool's units failed for a reason other than capacity) may be
absent the same way. ``backoff_reason`` (why each pool was backed off: ``stockout`` or ``failing-changes``) may be
absent too, and a reason this release does not know is left out: a back-off without a reason is read as a stockout,
as every back-off was before reasons were kept. ``open_conditions`` and ``conditions_ended`` (the alert
conditions raised and not yet resolved, and when the end of each was last told: ``agent.conditions``; ``gone`` and
``held_by`` may be absent; ``told``, when each severity was told, is no longer written, as a new leader tells the
conditions it inherits again, and is read back only as the release before wrote it) may be absent too: a release
that does not know them reads the rest, and its leader starts with no open condition, as every leader did before
they were kept. A condition entry this release cannot read (a kind or severity it does not know, a malformed time)
is left out, never the document: at worst its end is not told. ``slices_short_since`` (per TPU slice group, since
when each slice has been seen short of hosts: ``actuators.short_slices``; ``seen``, a read that found it short
since; ``hosts``, the Compute instance ids of the hosts it had when first seen short still there, ``[]`` when none
is) may be absent too: a release that does not know it reads the rest and saves without it, and each slice's wait
then starts at the first read that finds it short, as before it was kept. An entry written as a time alone (by the
release that first kept it) is read as short since then and last seen then, and one without ``hosts`` (by a release
before they were kept, which reads an entry of this one and saves it without them, or by the release that first kept
them, which left them out when there was none) as naming no host: it holds within an unbroken watch alone, as those
releases read it. That release leaves out an entry of this one with ``[]``: its slice's wait starts again. A slice entry
this release cannot read (a malformed time) is left out the same way, as the release before leaves out an entry of
this one: at worst that slice's wait starts again. ``scale_ups_waited`` (the scale-ups the leader waits for, in the
order asked: ``agent.budget_watch``; ``found_in_flight``, written only when true, marks units a leader found in flight
at its first read of a memory that kept none, ``asked_at`` being that read; ``judged_at``, the last tick that found it
still waited for, may be absent: never judged, not trusted by a new leader) may be absent too: a memory saved by a
release that does not know it, which reads the rest and saves without it (a rollback), decodes with none kept
(``None``), and its new leader waits for every unit in flight from its first read, as before they were kept; a present
list, empty too, is what the leader waited for. Adding it needs no new version: an older release of version 1 ignores
a key it does not know. An entry this release cannot read (a malformed time, units not whole numbers with ``from_units
< to_units``) is left out, never the document: at worst that scale-up is not waited for, so its stall is not told;
never one judged from a time earlier than it was asked. ``drains_settled`` (per pool, the keys of the drains taken
over that a leader settled, each with when, the latest ``agent.drain_records.SETTLED_KEPT`` over all pools, about 270
KB at most: ``agent.drains.NodeDrains.settled``) may be absent too: a release that
does not know it reads the rest and saves without it, and a replica leading again after another then settles and tells
again a removal it remembers that the other settled, as before it was kept (the lesser harm: never one lost). An
entry this release cannot read (a malformed time) is left out the same way. ``day_counts`` (the counts of the daily
report's window since its start, who led it and each replica's own counts: ``agent.daemon.day_counts``; a few keys a
replica, 16 replicas at most, a few KB) may be absent too: a release that does not know it reads the rest and saves
without it, and its new leader's report then covers only the part of the day it led, as before they were kept; a
memory without it, or with one this release cannot read whole (a malformed time, a count not a whole number), decodes
with none kept (``None``). Adding it needs no new version, as for ``scale_ups_waited``. A document this code cannot
read (no or an older unknown version, malformed) raises ``StateDocumentUnreadable``; the stores treat it as nothing
saved, so the next save replaces it. A document of a newer version raises ``StateDocumentTooNew`` (a
``StateUnavailable``): a replica of an older release that leads during a rolling upgrade or a rollback must not write
over the back-offs and blocks a newer one saved.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason, Condition, DayCounts, OpenCondition, PendingScaleUp, ReplicaCounts
from models import AlertKind, Severity, StateDocumentTooNew, StateDocumentUnreadable

V = TypeVar("V")

VERSION = 1
_REASONS = frozenset(r.value for r in BackoffReason)


def encode(memory: PlannerMemory, now: datetime, saved_by: str) -> str:
    document = {
        "version": VERSION,
        "saved_at": _time(now),
        "saved_by": saved_by,
        "last_change": {
            pool: {"at": _time(at), "direction": direction}
            for pool, (at, direction) in sorted(memory.last_change.items())
        },
        "backoff_until": {pool: _time(until) for pool, until in sorted(memory.backoff_until.items())},
        "backoff_reason": {pool: str(why) for pool, why in sorted(memory.backoff_reason.items())},
        "blocked": dict(sorted(memory.blocked.items())),
        "failing_since": {pool: _time(since) for pool, since in sorted(memory.failing_since.items())},
        "last_failure": {pool: _time(at) for pool, at in sorted(memory.last_failure.items())},
        "units_failing_since": {pool: _time(since) for pool, since in sorted(memory.units_failing_since.items())},
        "units_failed_last": {pool: _time(at) for pool, at in sorted(memory.units_failed_last.items())},
        "open_conditions": [_open(key, open_) for key, open_ in sorted(memory.open_conditions.items())],
        "conditions_ended": [
            {"kind": str(kind), "subject": subject, "at": _time(at)}
            for (kind, subject), at in sorted(memory.conditions_ended.items())
        ],
        "slices_short_since": {
            pool: {name: _short(since, seen, hosts) for name, (since, seen, hosts) in sorted(slices.items())}
            for pool, slices in sorted(memory.slices_short_since.items())
        },
    }
    document["drains_settled"] = {
        pool: {key: _time(at) for key, at in sorted(keys.items())}
        for pool, keys in sorted(memory.drains_settled.items())
    }
    if memory.scale_ups_waited is not None:  # None: not kept, as a release before wrote it
        document["scale_ups_waited"] = [_scale_up(p) for p in memory.scale_ups_waited]
    if memory.day_counts is not None:  # None: none kept, as a release before wrote it
        document["day_counts"] = _day(memory.day_counts)
    return json.dumps(document, indent=1, sort_keys=False)


def decode(text: str) -> PlannerMemory:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise StateDocumentUnreadable(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise StateDocumentUnreadable("not a JSON object")
    version = document.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise StateDocumentTooNew(
            f"the saved planner memory is version {version}, written by a newer release; this one reads version "
            f"{VERSION} and leaves it as it is"
        )
    if version != VERSION:
        raise StateDocumentUnreadable(f"version {version!r}; this agent reads version {VERSION}")
    try:
        return PlannerMemory(
            last_change={
                str(pool): (_parse(change["at"]), _direction(change["direction"]))
                for pool, change in document.get("last_change", {}).items()
            },
            backoff_until={str(pool): _parse(until) for pool, until in document.get("backoff_until", {}).items()},
            backoff_reason={
                str(pool): BackoffReason(why)
                for pool, why in document.get("backoff_reason", {}).items()
                if why in _REASONS
            },
            blocked={str(pool): str(why) for pool, why in document.get("blocked", {}).items()},
            failing_since={str(pool): _parse(since) for pool, since in document.get("failing_since", {}).items()},
            last_failure={str(pool): _parse(at) for pool, at in document.get("last_failure", {}).items()},
            units_failing_since={
                str(pool): _parse(since) for pool, since in document.get("units_failing_since", {}).items()
            },
            units_failed_last={str(pool): _parse(at) for pool, at in document.get("units_failed_last", {}).items()},
            open_conditions=dict(_conditions(document.get("open_conditions"), _read_open)),
            conditions_ended=dict(_conditions(document.get("conditions_ended"), lambda e: _parse(e["at"]))),
            slices_short_since=_short_since(document.get("slices_short_since")),
            scale_ups_waited=_scale_ups(document.get("scale_ups_waited")),
            drains_settled=_settled(document.get("drains_settled")),
            day_counts=_read_day(document.get("day_counts")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StateDocumentUnreadable(f"malformed planner memory: {type(exc).__name__}: {exc}") from None


def _time(at: datetime) -> str:
    if at.tzinfo is None:
        raise ValueError("planner memory times must be timezone-aware")
    return at.astimezone(UTC).isoformat()


def _parse(value: Any) -> datetime:
    if not isinstance(value, str):
        raise TypeError(f"time {value!r} is not a string")
    at = datetime.fromisoformat(value)
    if at.tzinfo is None:
        raise ValueError(f"time {value!r} has no time zone")
    return at.astimezone(UTC)


def _direction(value: Any) -> int:
    if value not in (1, -1):
        raise ValueError(f"direction {value!r} is neither 1 nor -1")
    return int(value)


def _open(key: Condition, condition: OpenCondition) -> dict[str, Any]:
    kind, subject = key
    entry: dict[str, Any] = {
        "kind": str(kind),
        "subject": subject,
        "since": _time(condition.since),
        "seen": _time(condition.seen),
        "severity": str(condition.severity),
        "summary": condition.summary,
        "held": condition.held,
    }
    if condition.told:  # kept by the release that held an inherited condition back; this one tells it again
        entry["told"] = {str(severity): _time(at) for severity, at in sorted(condition.told.items())}
    if condition.gone is not None:
        entry["gone"] = _time(condition.gone)
    if condition.held_by is not None:
        entry["held_by"] = _time(condition.held_by)
    return entry


def _read_open(entry: dict[str, Any]) -> OpenCondition:
    gone, held_by = entry.get("gone"), entry.get("held_by")
    return OpenCondition(
        since=_parse(entry["since"]),
        seen=_parse(entry["seen"]),
        severity=Severity(entry["severity"]),
        summary=str(entry["summary"]),
        told={Severity(severity): _parse(at) for severity, at in entry.get("told", {}).items()},
        gone=None if gone is None else _parse(gone),
        held=entry.get("held") is True,
        held_by=None if held_by is None else _parse(held_by),
    )


def _conditions(entries: Any, read: Callable[[dict[str, Any]], V]) -> Iterator[tuple[Condition, V]]:
    """The readable entries of a list of conditions; any other is left out (its end is not told)."""
    for entry in entries if isinstance(entries, list) else ():
        try:
            yield (AlertKind(entry["kind"]), str(entry["subject"])), read(entry)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue


def _short(since: datetime, seen: datetime, hosts: frozenset[str] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"since": _time(since), "seen": _time(seen)}
    if hosts is not None:  # [] too: no host is not a record that names none
        entry["hosts"] = sorted(hosts)
    return entry


def _short_since(groups: Any) -> dict[str, dict[str, tuple[datetime, datetime, frozenset[str] | None]]]:
    """The readable entries of ``slices_short_since``; any other is left out (that slice's wait starts again). A time
    alone (the form of the release that first kept them) is since and seen at once; it and an entry without ``hosts``
    name no host (None)."""
    out: dict[str, dict[str, tuple[datetime, datetime, frozenset[str] | None]]] = {}
    for pool, slices in groups.items() if isinstance(groups, dict) else ():
        for name, entry in slices.items() if isinstance(slices, dict) else ():
            try:
                if isinstance(entry, dict):
                    hosts = _hosts(entry["hosts"]) if "hosts" in entry else None
                    short = (_parse(entry["since"]), _parse(entry["seen"]), hosts)
                else:
                    short = (_parse(entry), _parse(entry), None)
            except (KeyError, TypeError, ValueError):
                continue
            out.setdefault(str(pool), {})[str(name)] = short
    return out


def _hosts(value: Any) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(host, str) for host in value):
        raise TypeError(f"hosts {value!r} is not a list of instance ids")
    return frozenset(value)


def _scale_up(scale_up: PendingScaleUp) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "pool": scale_up.pool_id,
        "asked_at": _time(scale_up.requested_at),
        "from_units": scale_up.from_units,
        "to_units": scale_up.to_units,
    }
    if scale_up.inherited:
        entry["found_in_flight"] = True
    if scale_up.judged_at is not None:
        entry["judged_at"] = _time(scale_up.judged_at)
    return entry


def _scale_ups(entries: Any) -> tuple[PendingScaleUp, ...] | None:
    """The readable entries of ``scale_ups_waited``; any other is left out (that scale-up is not waited for). None when
    the key is absent, or not a list: the document keeps no scale-ups (a release before wrote it)."""
    if not isinstance(entries, list):
        return None
    out: list[PendingScaleUp] = []
    for entry in entries:
        try:
            units = (_units(entry["from_units"]), _units(entry["to_units"]))
            if units[0] >= units[1]:
                raise ValueError(f"{units[0]} -> {units[1]} units is not a scale-up")
            found = entry.get("found_in_flight") is True
            judged = None if entry.get("judged_at") is None else _parse(entry["judged_at"])
            asked = _parse(entry["asked_at"])
            out.append(PendingScaleUp(str(entry["pool"]), asked, *units, inherited=found, judged_at=judged))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return tuple(out)


def _units(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"units {value!r} is not a whole number of units")
    return value


def _settled(pools: Any) -> dict[str, dict[str, datetime]]:
    """The readable entries of ``drains_settled``; any other is left out (that drain's removal, remembered by a replica
    leading again, is settled and told again there)."""
    out: dict[str, dict[str, datetime]] = {}
    for pool, keys in pools.items() if isinstance(pools, dict) else ():
        for key, at in keys.items() if isinstance(keys, dict) else ():
            try:
                out.setdefault(str(pool), {})[str(key)] = _parse(at)
            except (TypeError, ValueError):
                continue
    return out


_COUNTS = ("actions", "skips", "errors")


def _day(day: DayCounts) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "since": _time(day.since),
        "led": [[identity, _time(at)] for identity, at in day.led],
        "replicas": {
            identity: {name: dict(sorted(getattr(counts, name).items())) for name in _COUNTS}
            for identity, counts in sorted(day.replicas.items())
        },
    }
    if day.led_before:
        entry["led_before"] = day.led_before
    return entry


def _read_day(entry: Any) -> DayCounts | None:
    """The daily report's counts; None when absent or not readable whole (a new leader then counts its own alone)."""
    if not isinstance(entry, dict):
        return None
    try:
        led = tuple((_identity(by), _parse(at)) for by, at in entry.get("led", []))
        replicas = {
            _identity(identity): ReplicaCounts(*(_counts(counts.get(name, {})) for name in _COUNTS))
            for identity, counts in entry.get("replicas", {}).items()
        }
        return DayCounts(_parse(entry["since"]), led, replicas, _count(entry.get("led_before", 0)))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _identity(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"replica {value!r} is not a name")
    return value


def _counts(counts: Any) -> dict[str, int]:
    if not isinstance(counts, dict):
        raise TypeError(f"counts {counts!r} are not an object")
    return {str(key): _count(n) for key, n in counts.items()}


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"count {value!r} is not a whole number")
    return value
