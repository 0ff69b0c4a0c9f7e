"""How an alert reads in Slack: Block Kit blocks for people, and a one-line fallback text for notifications and
clients that cannot show blocks. Pure; Slack's size limits are respected by truncation (never splitting an escape),
every text an alert carries is redacted (an error quoting a credential or a webhook path is sent without it), and
every text Slack reads as mrkdwn, the fallback's included, has its control characters ``&``, ``<``, ``>`` escaped."""

from __future__ import annotations

from typing import Any

from models import AlertEvent, AlertKind, Severity
from models.redaction import redact

TITLES = {
    AlertKind.BUDGET_THRESHOLD: "Budget threshold crossed",
    AlertKind.PROJECTED_OVERSPEND: "Projected overspend",
    AlertKind.BUDGET_RESERVATION_REFUSED: "Shared budget: scale-up trimmed",
    AlertKind.STOCKOUT: "Capacity stockout",
    AlertKind.STALLED_SCALE_UP: "Scale-up not ready",
    AlertKind.MISSING_DATA: "Metrics missing or stale: holding",
    AlertKind.ACTUATOR_FAILURE: "Actuator failure",
    AlertKind.POOL_UNREADABLE: "Pool state unreadable: holding",
    AlertKind.ONPREM_CAPACITY: "On-prem capacity short, unread or above max_units",
    AlertKind.BROKEN_UNIT: "Broken with work on it: a person must decide",
    AlertKind.SPOT_RESERVE_UNHELD: "Spot reserve not held: less safety than configured",
    AlertKind.BUDGET_LEDGER_INCOMPLETE: "Budget spend incomplete: ledger began mid-period",
    AlertKind.BUDGET_HARD_STOP_DEFERRED: "Budget hard stop deferred: a pool cannot be read",
    AlertKind.TICK_FAILED: "Tick failed: pools held",
    AlertKind.DRAIN_UNFINISHED_PODS: "Node or slice removed with pods still terminating",
    AlertKind.DRAIN_DELETION_OVERDUE: "Node still being deleted after its drain: left cordoned",
}
_EMOJI = {Severity.INFO: ":information_source:", Severity.WARNING: ":warning:", Severity.CRITICAL: ":rotating_light:"}
_RESOLVED_EMOJI = ":white_check_mark:"
_HEADER_MAX, _SECTION_MAX, _FIELD_MAX, _FIELDS_MAX, _TEXT_MAX = 150, 3000, 2000, 10, 3000


def fallback_text(event: AlertEvent) -> str:
    """One line: what a phone notification or a text-only client shows, the agent it comes from first (its mode,
    cluster and replica), so that it is read before a long summary is cut. Slack reads it as mrkdwn, as the blocks:
    escaped the same way (an error quoting ``<`` or ``<!here>`` is shown as written, never taken for a link or a
    mention), then cut."""
    origin = f"({event.origin}) " if event.origin else ""
    line = f"[{_level(event).upper()}] {origin}{_title(event)}: {event.subject} - {event.summary}"
    return _cut(_escape(line), _TEXT_MAX)


def blocks(event: AlertEvent) -> list[dict[str, Any]]:
    """Header, the summary, one field per detail, and a context line with kind, severity, time and the agent it
    comes from (its mode, cluster and replica: ``AlertEvent.origin``)."""
    title = f"{_RESOLVED_EMOJI if event.resolved else _EMOJI[event.severity]} {_title(event)}"
    out: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(title, _HEADER_MAX), "emoji": True}},
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": _cut(f"*{_escape(event.subject)}*\n{_escape(event.summary)}", _SECTION_MAX),
            },
        },
    ]
    fields = [
        {"type": "mrkdwn", "text": _cut(f"*{_escape(key)}*\n{_escape(value)}", _FIELD_MAX)}
        for key, value in list(event.details.items())[:_FIELDS_MAX]
    ]
    if fields:
        out.append({"type": "section", "fields": fields})
    when = event.at.strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    context = f"{event.kind} · {_level(event)} · {when} · leadtime" + (f" {event.origin}" if event.origin else "")
    out.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _escape(context)}]})
    return out


def _title(event: AlertEvent) -> str:
    title = TITLES.get(event.kind, str(event.kind))
    return f"Resolved: {title}" if event.resolved else title


def _level(event: AlertEvent) -> str:
    """The severity, or ``resolved`` for the end of a condition (``agent.conditions``)."""
    return "resolved" if event.resolved else str(event.severity)


def _escape(text: str) -> str:
    """Redacted, then the three characters Slack mrkdwn needs escaped; anything else is shown as written."""
    return redact(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, "…" ending it when cut; an escape (``&amp;``, ``&lt;``, ``&gt;``) the cut
    would split goes whole."""
    if len(text) <= limit:
        return text
    kept = text[: limit - 1]
    split = kept.rfind("&", max(0, len(kept) - len("&amp;") + 1))
    if split >= 0 and ";" not in kept[split:]:
        kept = kept[:split]
    return kept + "…"
