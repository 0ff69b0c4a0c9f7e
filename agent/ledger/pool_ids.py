"""The ledger ids a budget's spend counts, and the spend no configured pool claims.

The ledger keeps spend by pool id, so a pool renamed in the configuration would start its budgets' period at zero:
a pool's ``previous_ids`` (the ids it was known by) count as its own, in its budgets' spend and in their coverage
(``counted_pools``). Spend recorded this period under an id no configured pool has or had (``unclaimed_spend``:
a pool renamed without them, a pool removed, another deployment's pool on a shared ledger) counts in no budget: the
spend meter logs it once, at the first read of the budgets' spend, naming each such pool and what it spent, and,
where a budget shares pools other agents run (``remote_pools``), the ``remote_previous_ids`` that would count a
renamed one's (``unclaimed_message``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from agent.planning.budget import Budget
from models import LedgerEntry

Previous = Mapping[str, Collection[str]]  # pool id -> the ids it was known by (its previous_ids)


def pool_previous_ids(own: Previous, budgets: Iterable[Budget]) -> dict[str, tuple[str, ...]]:
    """Every pool with the ids it was known by: this agent's pools' ``previous_ids`` (``own``) and the remote pools'
    of the budgets shared with other agents (``remote_previous_ids``). Two budgets that share a remote pool may each
    list some of its old ids (each old id belongs to one pool): all of them count as the pool's, in both budgets."""
    merged: dict[str, tuple[str, ...]] = {pool: tuple(dict.fromkeys(ids)) for pool, ids in own.items()}
    for budget in budgets:
        for pool, ids in budget.remote_previous_ids:
            merged[pool] = tuple(dict.fromkeys((*merged.get(pool, ()), *ids)))
    return merged


def own_pools(budget: Budget) -> list[str]:
    """The budget's pools this agent records (the others' agents judge theirs)."""
    return sorted(budget.pools - budget.remote_pools)


def counted_pools(pools: Iterable[str], previous: Previous | None) -> list[str]:
    """The ledger ids whose spend counts as these pools': theirs and their previous ids."""
    pools = set(pools)
    return sorted(pools.union(*((previous or {}).get(p, ()) for p in pools)))


@runtime_checkable
class _ListsEntries(Protocol):
    def entries(self) -> Sequence[LedgerEntry]: ...

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float: ...


def unclaimed_spend(
    ledger: object, budgets: Sequence[Budget], previous: Previous, now: datetime
) -> tuple[datetime, dict[str, float]] | None:
    """What the ledger's pools that no configured pool has or had (``previous``: every configured pool, with its
    previous ids; the budgets' pools, other agents' included) spent since the earliest start of the budgets'
    current periods, for those with a record since then; ``None`` without budgets, or from a ledger that cannot
    list its entries. Reads every entry of the ledger: asked once, at start."""
    if not budgets or not isinstance(ledger, _ListsEntries):
        return None
    since = min(b.period(now).start for b in budgets)
    known = set(counted_pools(previous, previous)).union(*(b.pools for b in budgets))
    found = sorted({e.pool_id for e in ledger.entries() if e.end > since or e.start >= since} - known)
    return since, {pool: ledger.spent([pool], since, now) for pool in found}


def unclaimed_message(
    since: datetime,
    spent: Mapping[str, float],
    where: str,
    when: Callable[[datetime], str],
    budgets: Sequence[Budget] = (),
) -> str:
    """The warning for ``unclaimed_spend``'s pools; ``where``: ``at <the ledger's place>``. An id may be the old id of
    a pool another agent runs in one of ``budgets`` (its ``remote_pools``), renamed there: its spend counts in those
    budgets once a budget's ``remote_previous_ids`` lists it, so the warning names that setting; nothing is to be done
    only about spend that counts in none of this agent's budgets."""
    named = ", ".join(f"{pool} ({usd:,.2f} USD)" for pool, usd in spent.items())
    message = (
        f"the ledger {where} holds spend since {when(since)} under pool ids no configured pool has: {named}; it "
        "counts in no budget. A pool of this agent renamed? List its old id in the pool's previous_ids, and its spend "
        "counts as the pool's own. "
    )
    remote = sorted(set().union(*(b.remote_pools for b in budgets)))
    if remote:
        shared = ", ".join(b.name for b in budgets if b.remote_pools)
        olds = ", ".join(spent)
        listed = (
            f"{{{remote[0]}: [{olds}]}}"
            if len(remote) == 1
            else f"{{<pool>: [{olds}]}}, <pool> the one of {', '.join(remote)} it was renamed to"
        )
        message += (
            f"A pool another agent runs, shared by budget {shared} (remote_pools: {', '.join(remote)}), renamed "
            f"there? List its old id in the budget's budgets[].remote_previous_ids: {listed}, and its spend counts "
            "in the budget. "
        )
    return message + "A pool removed, or another deployment's in none of this agent's budgets: nothing to do"
