"""Reading a Google Cloud Billing export and matching its rows to pools.

The rows are those of the standard (or detailed) usage cost export to BigQuery; the fields read, and where they
are documented, are listed in docs/billing-reconciliation.md. Two file forms:

* JSON: newline-delimited rows, as BigQuery exports a table (nested ``service``/``sku``/``resource`` records,
  ``labels`` and ``credits`` as lists), or one JSON array of such rows;
* CSV: one row per line under a header, as a query flattens them: ``service.description`` (or
  ``service_description``) and the like, ``labels`` and ``credits`` as JSON text (``TO_JSON_STRING``).

Every row is checked before anything is matched: a row whose times, cost, currency, labels or credits cannot be
read is reported with its line and the problem, and the file is refused as a whole (``models.BillingExportError``).
A row's billed cost is its ``cost`` plus its credits' amounts (credits are negative), in USD; rows of a pool are
summed per usage interval. Rows are matched within one cluster (``match_pools``): rows of a pool naming several
clusters are refused when no cluster is known, rather than adding up the bills of alike-named node pools.

An interval not over at the import (``not_over``: today's row of a daily export, the current hour's) is billed
for part of its usage only; stored, it would stand for the whole interval and replace the estimate of every entry
the agent records in it later. Such intervals are left out, to be imported once they are over.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent.ledger.billed import BilledCost, overlaps
from config.ledger import BillingSettings
from models import BillingExportError


@dataclass(frozen=True)
class BillingRow:
    line: int
    service: str
    sku: str
    start: datetime
    end: datetime
    labels: Mapping[str, str]
    resource_name: str | None
    resource_global_name: str | None
    cost: float
    currency: str
    credits: float  # the sum of the credits' amounts (zero or negative)

    @property
    def billed_usd(self) -> float:
        return self.cost + self.credits


@dataclass
class Matched:
    costs: list[BilledCost]
    rows: int  # rows matched to a pool
    unmatched: int  # rows of other resources (other services, clusters, node pools)
    lines: dict[tuple[str, datetime, datetime], int] = field(default_factory=dict)  # first line of each interval
    cluster: str | None = None  # the cluster whose rows were matched; None: rows of any (one) cluster
    counts: dict[tuple[str, datetime, datetime], int] = field(default_factory=dict)  # rows summed in each interval


@dataclass(frozen=True)
class NotOver:
    """The billed intervals of a ``Matched`` that end after ``at``, left out of ``kept``."""

    at: datetime
    kept: Matched
    left_out: list[BilledCost]
    rows: int  # the rows summed in the intervals left out
    lines: list[int]  # the first line of each interval left out, in the order of ``left_out``


def not_over(matched: Matched, at: datetime) -> NotOver:
    """Leave out the intervals whose usage ends after ``at``: their bill is partial, and the ledger would count it
    for every entry recorded in the interval later. An interval ending exactly at ``at`` is over."""
    kept = [c for c in matched.costs if c.end <= at]
    left_out = [c for c in matched.costs if c.end > at]
    keys = [(c.pool_id, c.start, c.end) for c in left_out]
    return NotOver(
        at=at,
        kept=replace(matched, costs=kept),
        left_out=left_out,
        rows=sum(matched.counts.get(key, 1) for key in keys),
        lines=[matched.lines[key] for key in keys],
    )


def read_export(path: Path) -> list[BillingRow]:
    """The rows of the export at ``path`` (JSON when its first character is ``{`` or ``[``, else CSV)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise BillingExportError(str(path), [f"cannot read the file: {exc}"]) from None
    records = _json_records(text, str(path)) if text.lstrip()[:1] in ("{", "[") else _csv_records(text, str(path))
    rows: list[BillingRow] = []
    problems: list[str] = []
    for line, record in records:
        try:
            rows.append(_row(line, record))
        except ValueError as exc:
            problems.append(f"line {line}: {exc}")
    if problems:
        raise BillingExportError(str(path), problems)
    if not rows:
        raise BillingExportError(str(path), ["no rows: is this a billing export?"])
    return rows


def match_pools(
    rows: Sequence[BillingRow],
    settings: BillingSettings,
    pools: Sequence[str],
    source: str,
    default_cluster: str | None = None,
) -> Matched:
    """The rows' billed cost per pool and usage interval; rows of no pool are counted, not imported. Rows of a
    pool must be in USD (the ledger's currency) and their intervals must not partly overlap.

    Rows whose ``cluster_label`` names another cluster than ``settings.cluster`` (else ``default_cluster``, the
    cluster the agent scales) are not this agent's. With neither, a pool whose rows name more than one cluster is
    refused: node pools are often named alike in every cluster, and their bills would be added up."""
    cluster = settings.cluster if settings.cluster is not None else default_cluster
    known = set(pools)
    unknown = sorted(p for p in (*settings.pools, *settings.resource_prefixes) if p not in known)
    if unknown:
        raise BillingExportError(source, [f"ledger.billing names pools the configuration lacks: {', '.join(unknown)}"])
    by_value = {value: pool for pool, value in settings.pools.items()}
    totals: dict[tuple[str, datetime, datetime], float] = {}
    lines: dict[tuple[str, datetime, datetime], int] = {}
    counts: dict[tuple[str, datetime, datetime], int] = {}
    problems: list[str] = []
    clusters: dict[str, dict[str, int]] = {}  # pool -> cluster named by its rows -> first line naming it
    unmatched = 0
    for row in rows:
        pool = _pool_of(row, settings, cluster, by_value, known)
        if pool is None:
            unmatched += 1
            continue
        if (named := row.labels.get(settings.cluster_label)) is not None:
            clusters.setdefault(pool, {}).setdefault(named, row.line)
        if row.currency != "USD":
            problems.append(f"line {row.line}: currency {row.currency!r} for pool {pool}: the ledger keeps USD")
            continue
        key = (pool, row.start, row.end)
        totals[key] = totals.get(key, 0.0) + row.billed_usd
        lines.setdefault(key, row.line)
        counts[key] = counts.get(key, 0) + 1
    if cluster is None:
        problems.extend(_mixed_clusters(clusters, settings.cluster_label))
    costs = [BilledCost(pool, start, end, cost) for (pool, start, end), cost in sorted(totals.items())]
    for before, after in overlaps(costs):
        first = lines[(before.pool_id, before.start, before.end)]
        second = lines[(after.pool_id, after.start, after.end)]
        problems.append(
            f"line {second}: pool {after.pool_id}: usage {_span(after)} overlaps usage {_span(before)} of line {first}"
        )
    if problems:
        raise BillingExportError(source, problems)
    return Matched(costs, len(rows) - unmatched, unmatched, lines, cluster, counts)


def how_matched(pool: str, settings: BillingSettings) -> str:
    """How rows are matched to ``pool``, for a message about a pool no row matched."""
    ways = []
    if pool in settings.pools or pool not in settings.resource_prefixes:
        ways.append(f"the label {settings.label} = {settings.pools.get(pool, pool)!r}")
    if pool in settings.resource_prefixes:
        ways.append(
            f"resource names starting {settings.resource_prefixes[pool]!r} (the detailed export's resource record only)"
        )
    return " or ".join(ways)


# -- matching -------------------------------------------------------------------------------------------------
def _pool_of(
    row: BillingRow, settings: BillingSettings, cluster: str | None, by_value: Mapping[str, str], known: set[str]
) -> str | None:
    # A row without the cluster label is not a GKE node's (a Cloud TPU VM, a queued resource): it can still be a
    # pool's by its resource name.
    named = row.labels.get(settings.cluster_label)
    if cluster is not None and named is not None and named != cluster:
        return None
    value = row.labels.get(settings.label)
    if value is not None:
        pool = by_value.get(value, value if value in known and value not in settings.pools else None)
        if pool is not None:
            return pool
    names = [n for n in (row.resource_name, _last_segment(row.resource_global_name)) if n]
    # The longest prefix that matches: with tpu-v5e- and tpu-v5e-large-, a tpu-v5e-large-1 row is the latter's.
    matching = [
        (len(prefix), pool) for pool, prefix in settings.resource_prefixes.items() if _any_starts(names, prefix)
    ]
    return max(matching)[1] if matching else None


def _mixed_clusters(clusters: Mapping[str, Mapping[str, int]], label: str) -> list[str]:
    return [
        f"line {sorted(seen.values())[1]}: pool {pool}: its rows name {len(seen)} clusters in the label {label} "
        f"({', '.join(f'{name} from line {line}' for name, line in sorted(seen.items()))}) and no cluster is set: "
        "set ledger.billing.cluster to the cluster of this agent's pools"
        for pool, seen in sorted(clusters.items())
        if len(seen) > 1
    ]


def _any_starts(names: list[str], prefix: str) -> bool:
    return any(name.startswith(prefix) for name in names)


def _last_segment(name: str | None) -> str | None:
    return None if name is None else name.rstrip("/").rsplit("/", 1)[-1]


def _span(cost: BilledCost) -> str:
    return f"[{cost.start.isoformat()}, {cost.end.isoformat()})"


# -- reading --------------------------------------------------------------------------------------------------
def _json_records(text: str, source: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    if text.lstrip().startswith("["):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BillingExportError(source, [f"line {exc.lineno}: not JSON: {exc.msg}"]) from None
        if not isinstance(document, list):
            raise BillingExportError(source, ["a JSON export is one row object per line, or one array of them"])
        for number, item in enumerate(document, start=1):
            yield number, _object(item, f"row {number}", source)
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BillingExportError(source, [f"line {number}: not JSON: {exc.msg}"]) from None
        yield number, _object(item, f"line {number}", source)


def _object(item: object, where: str, source: str) -> Mapping[str, Any]:
    if not isinstance(item, dict):
        raise BillingExportError(source, [f"{where}: a row must be a JSON object, got {type(item).__name__}"])
    return item


_CSV_NESTED = ("service", "sku", "resource")


def _csv_records(text: str, source: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    reader = csv.DictReader(text.splitlines(keepends=True))
    header = reader.fieldnames or []
    columns = {_column(name) for name in header}
    missing = [c for c in ("usage_start_time", "usage_end_time", "cost", "currency") if c not in columns]
    if missing:
        raise BillingExportError(source, [f"line 1: the header lacks the column(s) {', '.join(missing)}"])
    for raw in reader:
        record: dict[str, Any] = {}
        for name, value in raw.items():
            if name is None:
                raise BillingExportError(source, [f"line {reader.line_num}: more values than the header names"])
            key = _column(name)
            if "." in key:
                outer, inner = key.split(".", 1)
                record.setdefault(outer, {})[inner] = value or None
            elif key in ("labels", "credits"):
                record[key] = _json_text(value, key, reader.line_num, source)
            else:
                record[key] = value
        yield reader.line_num, record


def _column(name: str) -> str:
    """``service_description`` and ``service.description`` both name the nested field."""
    name = name.strip()
    for outer in _CSV_NESTED:
        if name.startswith(f"{outer}_"):
            return f"{outer}.{name[len(outer) + 1 :]}"
    return name


def _json_text(value: str | None, key: str, line: int, source: str) -> object:
    if value is None or not value.strip():
        return []
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise BillingExportError(source, [f"line {line}: {key}: not JSON text: {exc.msg}"]) from None


def _row(line: int, record: Mapping[str, Any]) -> BillingRow:
    start = _time(record.get("usage_start_time"), "usage_start_time")
    end = _time(record.get("usage_end_time"), "usage_end_time")
    if end <= start:
        raise ValueError(f"usage_end_time {end.isoformat()} is not after usage_start_time {start.isoformat()}")
    currency = record.get("currency")
    if not isinstance(currency, str) or len(currency.strip()) != 3:
        raise ValueError(f"currency: a three-letter code is needed, got {currency!r}")
    resource = _nested(record, "resource")
    return BillingRow(
        line=line,
        service=_text(_nested(record, "service").get("description")),
        sku=_text(_nested(record, "sku").get("description")),
        start=start,
        end=end,
        labels=_labels(record.get("labels", [])),
        resource_name=_text(resource.get("name")) or None,
        resource_global_name=_text(resource.get("global_name")) or None,
        cost=_amount(record.get("cost"), "cost"),
        currency=currency.strip().upper(),
        credits=_credits(record.get("credits", [])),
    )


def _nested(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = record.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{key}: a record (object) is needed, got {value!r}")
    return value


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _time(value: object, key: str) -> datetime:
    """BigQuery's ``2026-03-01 00:00:00 UTC``, or ISO 8601 with an offset (``2026-03-01T00:00:00Z``)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key}: missing")
    text = value.strip()
    utc = text.endswith(" UTC")
    try:
        when = datetime.fromisoformat(text.removesuffix(" UTC"))
    except ValueError:
        raise ValueError(f"{key}: {value!r} is not a time") from None
    if when.tzinfo is None:
        if not utc:
            raise ValueError(f"{key}: {value!r} has no time zone")
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC)


def _amount(value: object, key: str) -> float:
    if isinstance(value, bool) or value is None or value == "":
        raise ValueError(f"{key}: missing")
    try:
        amount = float(value) if isinstance(value, (int, float, str)) else math.nan
    except ValueError:
        raise ValueError(f"{key}: {value!r} is not a number") from None
    if not math.isfinite(amount):
        raise ValueError(f"{key}: {value!r} is not a finite number")
    return amount


def _labels(value: object) -> dict[str, str]:
    if not isinstance(value, list):
        raise ValueError(f"labels: a list of key/value records is needed, got {value!r}")
    labels: dict[str, str] = {}
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise ValueError(f"labels: each label needs a key and a value, got {item!r}")
        labels[item["key"]] = _text(item.get("value"))
    return labels


def _credits(value: object) -> float:
    if not isinstance(value, list):
        raise ValueError(f"credits: a list of credit records is needed, got {value!r}")
    total = 0.0
    for item in value:
        if not isinstance(item, dict):
            raise ValueError(f"credits: each credit is a record with an amount, got {item!r}")
        total += _amount(item.get("amount"), "credits.amount")
    return total
