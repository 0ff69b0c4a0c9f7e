"""The Actuator contract for a pool whose read fails, run on the simulated cluster and on every real adapter: the
pool is left out of ``list_pools`` and reported by ``unread_pools`` with the error's kind (a refused permission is
permanent, a rate limit transient), and is listed again once it can be read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actuators.base import unread_pools
from models import ActuatorError, PermanentActuatorError, TransientActuatorError
from tests.contract.harnesses import (
    HARNESSES,
    INITIAL,
    POOL,
    GkeNodePoolHarness,
    GkeTpuSliceHarness,
    Harness,
    QueuedResourceHarness,
    SimHarness,
)

REFUSALS = {
    403: ("AccessDenied", "The caller does not have permission", PermanentActuatorError),
    429: ("Throttling", "Too many requests, please try again later", TransientActuatorError),
}


@pytest.fixture(params=sorted(HARNESSES))
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    built = HARNESSES[request.param]()
    try:
        yield built
    finally:
        built.close()


def _refuse_next_read(h: Harness, status: int) -> None:
    """The pool's next read is refused with ``status``."""
    code, message, kind = REFUSALS[status]
    if isinstance(h, SimHarness):
        h.sim.fail_reads(POOL, kind(POOL, message))
    elif isinstance(h, GkeNodePoolHarness | GkeTpuSliceHarness):
        h.fake.fail_next(1, status, message, path="/nodePools")
    elif isinstance(h, QueuedResourceHarness):
        h.fake.fail_next(1, status, message, path="/queuedResources")
    else:  # the AWS harnesses (their clients make each call once)
        first_call = "DescribeNodegroup" if "Eks" in type(h).__name__ else "DescribeAutoScalingGroups"
        h.fake.fail(first_call, code, message, status=status)  # type: ignore[attr-defined]


def _readable_again(h: Harness) -> None:
    if isinstance(h, SimHarness):
        h.sim.fail_reads(POOL, None)


@pytest.mark.parametrize("status", sorted(REFUSALS))
def test_a_pool_whose_read_fails_is_left_out_reported_and_listed_again(harness: Harness, status: int) -> None:
    kind: type[ActuatorError] = REFUSALS[status][2]
    _refuse_next_read(harness, status)

    assert [s.pool_id for s in harness.actuator.list_pools()] == []
    (error,) = unread_pools(harness.actuator).values()
    assert (type(error), error.pool_id) == (kind, POOL)

    _readable_again(harness)
    (state,) = harness.actuator.list_pools()
    assert (state.pool_id, state.target_units) == (POOL, INITIAL)
    assert unread_pools(harness.actuator) == {}
