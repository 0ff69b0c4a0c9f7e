"""A ledger write that fails after the tick acted (PostgreSQL restarting mid-tick, a full disk) fails the tick, but
loses neither its alerts nor its spend: the alerts collected until then are delivered, the scale-ups carried out are
remembered, and the readings the write could not record are recorded by the next tick's write.

A stockout is raised only when it begins, and the ticks after it find the pool already backed off: told at no other
tick. The loop runs on a replayed trace and a simulated cluster, its alerts posted through the Slack notifier to a
local webhook receiver, as in ``test_resolved_conditions``; the ledger is the in-memory one, whose writes fail at the
instants given."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.ledger import InMemoryLedger
from agent.ledger.base import Newest
from agent.loop import Agent
from models import LedgerEntry, LedgerUnavailable
from models.clock import SimulatedClock
from tests.conftest import TraceWriter
from tests.fakes.slack_receiver import SlackReceiver
from tests.unit.test_missing_data_alerts import NOW, START, arrive
from tests.unit.test_resolved_conditions import FlakyCluster, _agent

EVER = (datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC))
STOCKOUT = "[WARNING] Capacity stockout: serve-pool"


class BlippingLedger(InMemoryLedger):
    """The in-memory ledger, whose ``n``-th write at an instant fails for each (instant, n) in ``fail``."""

    def __init__(self, clock: SimulatedClock, fail: set[tuple[datetime, int]]) -> None:
        super().__init__()
        self.clock, self.fail = clock, fail
        self.writes: dict[datetime, int] = {}

    def update(self, pools: Sequence[str], derive: Callable[[Newest], Sequence[LedgerEntry]]) -> None:
        now = self.clock.now()
        self.writes[now] = self.writes.get(now, 0) + 1
        if (now, self.writes[now]) in self.fail:
            raise LedgerUnavailable("the ledger database postgresql://db:5432/leadtime is unreachable: refused")
        super().update(pools, derive)


def _run(trace: Path, fail: set[tuple[datetime, int]]) -> tuple[list[str], list[str], Agent, BlippingLedger]:
    """Ticks every 5 minutes from 10:00 to 10:20, serve-pool out of capacity until 10:07; what each tick did and
    the messages posted."""
    clock = SimulatedClock(NOW)
    with SlackReceiver() as receiver:
        agent, cluster = _agent(trace, clock, receiver)
        assert isinstance(cluster, FlakyCluster)
        ledger = BlippingLedger(clock, fail)
        agent.parts.ledger = agent.budget_watch.meter.ledger = ledger
        cluster.add_stockout("serve-pool", NOW, NOW + timedelta(minutes=7))
        outcome = []
        for minute in range(0, 25, 5):
            clock.set(NOW + timedelta(minutes=minute))
            arrive(agent, clock)
            try:
                agent.run_once(clock.now())
                outcome.append("ok")
            except LedgerUnavailable:
                outcome.append("failed")
        texts = [str(m["text"]) for m in receiver.received]
    return outcome, texts, agent, ledger


def test_the_stockout_is_told_though_the_ledger_fails_after_the_tick_acted(write_trace: TraceWriter) -> None:
    trace = write_trace({"train": [16.0] * 40, "serve": [16.0] * 40}, start=START.isoformat())
    outcome, texts, _, _ = _run(trace, {(NOW, 2)})  # the 2nd write at 10:00: the agent's own scale-ups
    assert outcome == ["failed", "ok", "ok", "ok", "ok"]
    assert sum(t.startswith(STOCKOUT) for t in texts) == 1, texts


def test_no_spend_and_no_scale_up_is_lost_to_the_failed_write(write_trace: TraceWriter) -> None:
    trace = write_trace({"train": [16.0] * 40, "serve": [16.0] * 40}, start=START.isoformat())
    _, steady_texts, steady, steady_ledger = _run(trace, set())
    _, texts, blipped, ledger = _run(trace, {(NOW, 2)})
    pools = ["train-pool", "serve-pool"]
    assert steady_ledger.spent(pools, *EVER) > 0
    assert ledger.spent(pools, *EVER) == steady_ledger.spent(pools, *EVER)
    assert ledger.entries() == steady_ledger.entries()
    # the scale-ups of the failed tick are remembered as those of the tick that did not fail: they would name the
    # scale-ups behind a projected overspend, and a scale-up whose units never come would be alerted as stalled
    assert blipped.budget_watch.scale_ups == steady.budget_watch.scale_ups
    assert blipped.budget_watch.pending == steady.budget_watch.pending
    assert blipped.budget_watch.scale_ups, "no scale-up carried out: the scenario tests nothing"
    assert sorted(texts) == sorted(steady_texts)


def test_readings_are_kept_through_writes_that_keep_failing(write_trace: TraceWriter) -> None:
    """The ledger fails at 10:10 once serve-pool was scaled up, and again at 10:15's first write, the pools' readings
    (that tick fails before it plans): each failed write keeps what it was given, the readings kept before it among
    them, and 10:20's records them all before its own."""
    trace = write_trace({"train": [16.0] * 40, "serve": [16.0] * 40}, start=START.isoformat())
    _, _, steady, steady_ledger = _run(trace, set())
    assert [r.pool_id for _, r in steady.budget_watch.scale_ups] == ["train-pool", "serve-pool"]
    ten_past, quarter_past = NOW + timedelta(minutes=10), NOW + timedelta(minutes=15)
    outcome, _, _, ledger = _run(trace, {(ten_past, 2), (quarter_past, 1)})
    assert outcome == ["ok", "ok", "failed", "failed", "ok"]
    assert ledger.entries() == steady_ledger.entries()
