"""A release whose call gave no clear answer keeps its claim: the cloud may carry it out.

West and east each hold 8 units (4 busy, 4 idle) of a pool in a budget they share, whose monthly cap the two fleets
together break by 3 units (``tests.test_shared_budget_claims_hourly_second_budget``, with no second budget). At
12:10 west's release of 3 units reaches the cloud, which carries it out, but its call fails: the answer times out
(the adapters give that as a ``TransientActuatorError``, like a refusal a retry may fix) or cannot be read (an error
no adapter translates, failing the tick). The failed release lost its claim: east, ticking after west, read west's
units as staying and released 3 more (6 where 3 were needed), and west bought 3 back (5 -> 8) at 12:20. A release's
call with no clear answer (``ActionResult.unclear``) now counts as sent for its claim and its mark: east releases
nothing. A release timing out so tick after tick, the cloud carrying out none of them, counts so only until the
pool's releases have had no clear answer for its lead time (10 minutes): east then sheds for its units.

Whether an answer is clear is the adapter's to say (``TransientActuatorError.maybe_applied``). Every transient error
counted as unclear, a refusal too (a rate limit, another operation on the cluster, a write the leadership left did not
cover): east waited the lead time, shedding at 12:20, not 12:10, the cap broken 10 minutes longer. And the lead time
was counted from the pool's first failed change, refusals included: with west's release refused at 12:10 and 12:15
and timing out at 12:20 (carried out), east, starting at 12:20, shed 3 more (6 for 3) and west bought them back. It is
now counted from the first of its releases in a row with no clear answer.

Run on two connections to one real PostgreSQL ledger, west ticking first at each instant."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import botocore.exceptions as boto
import pytest
from google.api_core import exceptions as google

from actuators import aws_errors, vendor_errors
from actuators.write_window import WriteWindow, write_timeout, write_window
from models import ActionResult, LedgerEntry, TransientActuatorError
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database
from tests.test_shared_budget_claims_hourly_second_budget import (
    BUSY,
    TEAM_NEEDED,
    _config,
    _released,
)
from tests.test_shared_budget_shed_once import FLEET, SEEDED_USD, START, TICK

pytestmark = POSTGRES

SETTLED = START + 2 * TICK  # the idle units are idle for the 10-minute window from here
LEAD_TIME = timedelta(minutes=10)  # west's pool's


def _api(kind: Callable[..., Exception], message: str) -> Exception:
    """A Google client's exception (their constructors carry no annotations)."""
    return kind(message)


def _not_sent(pool_id: str) -> TransientActuatorError:
    try:
        WriteWindow(timedelta(seconds=5), lambda: 1.0).timeout(pool_id)
    except TransientActuatorError as exc:
        return exc
    raise AssertionError("the write was let through")


def _aws(code: str, message: str) -> Callable[[str], Exception]:
    error = boto.ClientError({"Error": {"Code": code, "Message": message}}, "SetDesiredCapacity")
    return lambda pool_id: aws_errors.from_aws(pool_id, error)


def _google(exc: Exception) -> Callable[[str], Exception]:
    return lambda pool_id: vendor_errors.from_google(pool_id, exc)


# Refusals as the adapters translate them: nothing of the release was applied.
REFUSALS: dict[str, Callable[[str], Exception]] = {
    "gke-409-busy": _google(
        _api(google.Conflict, "Operation operation-1 is currently upgrading cluster ml. Please wait")
    ),
    "gke-429": _google(
        _api(google.TooManyRequests, "Too many operations: cluster hits the concurrent operations quota 5")
    ),
    "gke-400-busy": _google(_api(google.FailedPrecondition, "Cluster is running incompatible operation operation-123")),
    "write-not-sent": _not_sent,
    "aws-throttling": _aws("Throttling", "Rate exceeded"),
    "aws-activity": _aws("ScalingActivityInProgress", "Scaling activity act-1 is in progress"),
    "aws-no-connection": lambda pool_id: aws_errors.from_aws(
        pool_id, boto.EndpointConnectionError(endpoint_url="https://autoscaling.us-east-1.amazonaws.com")
    ),
}


def _run(
    write_trace: TraceWriter,
    database: Database,
    how: str,
    ticks: int = 6,
    error: Callable[[str], Exception] | None = None,
    east_away: tuple[datetime, datetime] = (START, START),
) -> tuple[dict[datetime, int | None], dict[datetime, int], dict[datetime, tuple[int, int]], list[str]]:
    """What west (``None``: its tick failed) and east release at each tick, and their pools' targets after it, west's
    release calls failing as ``how`` says (``error``: the refusal raised); and the keys of west's calls that failed.
    East's agent does not tick in ``east_away`` (from, to)."""
    trace = write_trace({"train": [BUSY * 8.0] * 80}, start=(START - timedelta(hours=2)).isoformat())
    west_released: dict[datetime, int | None] = {}
    east_released: dict[datetime, int] = {}
    units: dict[datetime, tuple[int, int]] = {}
    failed: list[str] = []
    with rig.postgres_ledgers(database) as ledgers:
        ledgers[0].record(LedgerEntry("west", START - timedelta(hours=125), START, 1, SEEDED_USD))
        west = rig.member(_config("west", "east", []), "west", trace, ledgers[0], START, FLEET)
        east = rig.member(_config("east", "west", []), "east", trace, ledgers[1], START, FLEET)
        cluster = west.cluster
        resize = cluster.resize

        def resize_answered_unclearly(pool_id: str, to_units: int, key: str) -> ActionResult:
            calls = {"refused": None, "timed out, never applied": None, "refused, then timed out": 3}.get(how, 1)
            if to_units >= FLEET or (
                calls is not None and len(failed) >= calls
            ):  # the calls that fail: all, or so many
                return resize(pool_id, to_units, key)
            failed.append(key)
            if how == "refused" or (how == "refused, then timed out" and len(failed) < 3):
                assert error is not None
                raise error(pool_id)  # the cloud carries out none of them
            if how == "timed out, never applied":
                raise TransientActuatorError(pool_id, "Read timeout on endpoint URL", maybe_applied=True)
            if how == "partly sent, then refused":  # two writes (two zones): the first applied, the second refused
                assert error is not None
                lead_left = iter([60.0, 1.0 if error is _not_sent else 60.0])  # the second's window refuses it
                with write_window(WriteWindow(timedelta(seconds=5), lambda: next(lead_left))):
                    write_timeout(pool_id)
                    resize(pool_id, to_units, key)
                    write_timeout(pool_id)
                    raise error(pool_id)
            result = resize(pool_id, to_units, key)  # the cloud takes the change; its answer is lost
            if how in ("timeout", "refused, then timed out"):
                raise TransientActuatorError(
                    pool_id, f"Read timeout on endpoint URL (to {to_units})", maybe_applied=True
                )
            raise RuntimeError(f"the response to {result.key} could not be parsed")

        cluster.resize = resize_answered_unclearly  # type: ignore[method-assign]
        for i in range(ticks):
            now = START + i * TICK
            for one in (west, east):
                one.cluster.serve(now, {"train": BUSY * 8.0})
                one.clock.set(now)
            try:
                west_released[now] = _released(west.agent.run_once(now).plan)
            except RuntimeError:
                west_released[now] = None
            east_released[now] = (
                _released(east.agent.run_once(now).plan) if not east_away[0] <= now < east_away[1] else 0
            )
            units[now] = (west.cluster.list_pools()[0].target_units, east.cluster.list_pools()[0].target_units)
    return west_released, east_released, units, failed


@pytest.mark.parametrize("how", ["timeout", "untranslated"])
def test_a_release_carried_out_whose_call_failed_keeps_its_claim(
    write_trace: TraceWriter, postgres_database: Database, how: str
) -> None:
    west_released, east_released, units, failed = _run(write_trace, postgres_database, how)
    assert len(failed) == 1, failed
    assert west_released[SETTLED] == (TEAM_NEEDED if how == "timeout" else None), west_released
    assert units[SETTLED] == (FLEET - TEAM_NEEDED, FLEET), units  # (5, 5) before: east shed too
    assert sum(east_released.values()) == 0, east_released
    assert all(u == (FLEET - TEAM_NEEDED, FLEET) for at, u in units.items() if at >= SETTLED), units  # 8 at 12:20


def test_a_release_timing_out_for_the_pools_lead_time_no_longer_keeps_its_claim(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    _, east_released, units, failed = _run(write_trace, postgres_database, "timed out, never applied", ticks=5)
    assert len(failed) == 3, failed  # 12:10, 12:15, 12:20: the cloud carried out none
    assert east_released[SETTLED] == east_released[SETTLED + TICK] == 0, east_released  # it may have been carried out
    assert east_released[SETTLED + LEAD_TIME] == TEAM_NEEDED, east_released  # no clear answer for the lead time
    assert units[START + 4 * TICK] == (FLEET, FLEET - TEAM_NEEDED), units


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
def test_a_release_the_cloud_refused_lets_the_other_shed_at_once(
    write_trace: TraceWriter, postgres_database: Database, refusal: str
) -> None:
    _, east_released, units, failed = _run(write_trace, postgres_database, "refused", 4, REFUSALS[refusal])
    assert failed, failed
    assert east_released[SETTLED] == TEAM_NEEDED, east_released  # 12:20 before: counted as possibly carried out
    assert sum(east_released.values()) == TEAM_NEEDED, east_released
    assert units[SETTLED] == (FLEET, FLEET - TEAM_NEEDED), units


@pytest.mark.parametrize("refusal", ["gke-429", "write-not-sent"])
def test_a_release_refused_after_an_earlier_write_of_it_was_sent_keeps_its_claim(
    write_trace: TraceWriter, postgres_database: Database, refusal: str
) -> None:
    """West's release takes two writes: the first is carried out, the second refused (too many operations, or the
    write window left by the leadership too short: ``write-not-sent`` lets the second write's own window refuse it)."""
    how = "partly sent, then refused"
    _, east_released, units, failed = _run(write_trace, postgres_database, how, 6, REFUSALS[refusal])
    assert len(failed) == 1, failed
    assert units[SETTLED] == (FLEET - TEAM_NEEDED, FLEET), units  # (5, 5) before: the refusal read as nothing applied
    assert sum(east_released.values()) == 0, east_released
    assert all(u == (FLEET - TEAM_NEEDED, FLEET) for at, u in units.items() if at >= SETTLED), units


def test_refusals_before_a_release_carried_out_do_not_cut_its_claim(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    """West's release is refused at 12:10 and 12:15 (east's ticks not running then: its process restarting) and times
    out at 12:20, carried out: the lead time is counted from that call's, not from the first refusal's failure."""
    east_from = SETTLED + LEAD_TIME
    throttled = REFUSALS["aws-throttling"]
    _, east_released, units, failed = _run(
        write_trace, postgres_database, "refused, then timed out", 6, throttled, (SETTLED, east_from)
    )
    assert len(failed) == 3, failed
    assert units[east_from] == (FLEET - TEAM_NEEDED, FLEET), units  # (5, 5) before: east shed 3 more
    assert sum(east_released.values()) == 0, east_released
    assert all(u == (FLEET - TEAM_NEEDED, FLEET) for at, u in units.items() if at >= east_from), units  # 8 at 12:30
