"""Alerts to Slack through an incoming webhook (slack_sdk ``WebhookClient``).

What it promises its caller: ``notify`` never raises; it may wait up to ``request_timeout`` (a hanging webhook) or
``max_retry_after`` (a 429), so the daemon calls it only from the delivery thread of ``agent.notify.queued``,
never from a tick. A delivery that fails (connection refused, timeout, HTTP 5xx, a 429 asking to wait longer than
``max_retry_after``) keeps the alert pending and holds further attempts for a back-off; the next ``notify`` or
``flush`` after it tries again. An outage is logged once when it starts and once when it ends. A 429 with a short
Retry-After is retried in place by slack_sdk's ``RateLimitErrorRetryHandler``.

Slack's own refusals (its changelog "Improving error conditions for Incoming Webhooks", 2016-05-17) are told
apart: a 400 (``invalid_payload``, ``user_not_found``) refuses that message, which no retry fixes, so the alert is
dropped (counted in ``rejected``, logged as an error, and not posted again within ``dedup_window``, as if it had
been delivered) and the alerts behind it go on; a 403 (``action_prohibited``), 404 (``channel_not_found``,
``no_service``) or 410 (``channel_is_archived``) refuses the webhook itself: the alerts are kept, attempts wait the
longest back-off, ``webhook_refused`` is True until Slack takes a message again, and an error, logged each time the
cause of an outage becomes such a refusal (also after a blip of another kind), says what to do: a new webhook's URL
where this one came from, then a restart, since the URL is read once, at start (the alerts held are lost then).

Also: one message per alert key per ``dedup_window`` (measured in event time), at most
``rate_limit_per_minute`` messages (token bucket), at most ``max_pending`` alerts kept
while Slack is unreachable (the oldest are dropped first, and counted; a condition raised again keeps its place,
and a held "resolved" of it is dropped: it would arrive after the newer raise and say the condition ended while it
holds).

The waits (the token bucket's refill, the outage back-off, an outage's logged length) run on the injected clock's
monotonic time, so a wall-clock step (NTP, a resumed VM) neither holds alerts for the step's length nor cuts a
back-off short; wall time is only the alerts' own (event times, de-duplication).

The webhook URL is a secret: it comes from an environment variable or a mounted file, never from the YAML,
and it is never logged, even mangled (``models.redaction``): the notifier redacts what it logs, the SDK gets its
own logger, quiet below WARNING and redacting, and the URL is handed to the process's redacting log filters.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.webhook import WebhookClient

from agent.log_redaction import RedactingFilter, protect_secret
from agent.notify.dedup import DedupWindow
from agent.notify.slack_message import blocks, fallback_text
from agent.notify.webhook import webhook_source, webhook_url
from config.alerts import AlertSettings
from models import AlertEvent
from models.clock import Clock
from models.redaction import redact, secret_fragments

# The webhook URL's source moved to agent.notify.webhook (no Slack client there); still importable from here.
__all__ = [
    "BoundedRateLimitRetryHandler",
    "SlackNotifier",
    "build_slack_notifier",
    "retry_after_s",
    "webhook_source",
    "webhook_url",
]

log = logging.getLogger(__name__)
_MAX_BACKOFF_FACTOR = 16


class BoundedRateLimitRetryHandler(RateLimitErrorRetryHandler):
    """Retry a 429 in place only when Slack asks to wait at most ``max_wait_s``; longer waits are not spent
    blocking the loop (the notifier holds the alert and tries again after Retry-After)."""

    def __init__(self, max_wait_s: float) -> None:
        super().__init__(max_retry_count=1)
        self.max_wait_s = max_wait_s

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if not super()._can_retry(state=state, request=request, response=response, error=error):
            return False
        wait = retry_after_s(response.headers if response is not None else {})
        return wait is not None and wait <= self.max_wait_s


def retry_after_s(headers: Mapping[str, Any]) -> float | None:
    """Retry-After in seconds from response headers (any case; a value or a list of values), if readable."""
    for key, value in headers.items():
        if key.lower() == "retry-after":
            raw = value[0] if isinstance(value, list | tuple) and value else value
            try:
                return max(0.0, float(str(raw)))
            except ValueError:
                return None
    return None


class SlackNotifier:
    def __init__(
        self,
        client: WebhookClient,
        clock: Clock,
        dedup_window: timedelta = timedelta(hours=1),
        rate_limit_per_minute: int = 10,
        outage_backoff: timedelta = timedelta(minutes=1),
        max_pending: int = 100,
        webhook_source: str = "the alert webhook setting",
    ) -> None:
        """``webhook_source``: where the URL came from, for the error that says it must be replaced."""
        self._client = client
        self._webhook_source = webhook_source
        self._secrets = secret_fragments(client.url or "")
        self._clock = clock
        self.dedup_window = dedup_window
        self._rate = rate_limit_per_minute
        self._tokens = float(rate_limit_per_minute)
        # The waits (the bucket's refill, the outage back-off, the outage's length) are on the monotonic clock: a
        # wall-clock step must not hold every alert for the step's length, nor cut a back-off short.
        self._tokens_at: float | None = None
        self._backoff = outage_backoff
        self._failures = 0
        self._hold_until: float | None = None
        self._pending: OrderedDict[str, AlertEvent] = OrderedDict()
        self._max_pending = max_pending
        self._sent = DedupWindow(dedup_window)
        self._refused = DedupWindow(dedup_window)  # messages Slack refused (400): quiet for the window too
        self._outage_since: float | None = None
        self._refused_since: float | None = None
        self.delivered = 0
        self.dropped = 0
        self.rejected = 0

    def __repr__(self) -> str:
        return (
            f"SlackNotifier(pending={len(self._pending)}, delivered={self.delivered}, dropped={self.dropped}, "
            f"rejected={self.rejected})"
        )

    @property
    def pending(self) -> tuple[AlertEvent, ...]:
        return tuple(self._pending.values())

    @property
    def webhook_refused(self) -> bool:
        """Slack's latest word on the webhook was a refusal of the webhook itself (403, 404, 410): no alert gets
        through until it is replaced. Cleared once Slack takes a message again (or judges one: a 400)."""
        return self._refused_since is not None

    def notify(self, event: AlertEvent) -> bool:
        """Deliver ``event`` now if allowed; True when delivered or a duplicate within the window."""
        if not event.resolved:
            self._drop_stale_end(event)
        if self._is_duplicate(event):
            return True
        # A condition raised again keeps its place (with the newer event): moving it to the back would make the
        # one-off alerts in front of it the first to be dropped when the queue overflows.
        self._pending[event.dedup_key] = event
        while len(self._pending) > self._max_pending:
            _, dropped = self._pending.popitem(last=False)
            self.dropped += 1
            log.warning("alert queue full: dropped %s %s", dropped.kind, dropped.subject)
        self.flush()
        return event.dedup_key not in self._pending and self._sent.last_handled(event) == event.at

    def flush(self) -> int:
        """Try the pending alerts, oldest first, within the rate limit and outside a back-off. How many went."""
        sent = 0
        for key, event in list(self._pending.items()):
            now = self._clock.monotonic()
            if self._hold_until is not None and now < self._hold_until:
                break
            if self._is_duplicate(event):
                del self._pending[key]
                continue
            if not self._take_token(now):
                break
            outcome = self._send(event)
            if outcome is None:  # Slack refused this message: retrying it would hold every alert behind it
                del self._pending[key]
                self.rejected += 1
                self._refused.handled(event)  # it would be refused again: quiet for the window, not every tick
                continue
            if not outcome:
                break
            del self._pending[key]
            self._sent.handled(event)
            sent += 1
        return sent

    # -- internals ----------------------------------------------------------------------------------------
    def _drop_stale_end(self, raised: AlertEvent) -> None:
        """A held end of the condition ``raised`` is raised again for is stale: delivered after it (or after the
        raise held before it, which keeps its place), it would say the condition ended while it holds, and clear
        its de-duplication so the next tick posts it again. A repeat of a raise already told drops it too."""
        for key, held in list(self._pending.items()):
            if held.resolved and (held.kind, held.subject) == (raised.kind, raised.subject) and held.at <= raised.at:
                del self._pending[key]
                log.info("dropped the held end of %s %s: raised again since", raised.kind, raised.subject)

    def _is_duplicate(self, event: AlertEvent) -> bool:
        """Sent, or refused by Slack, within the window, at this severity or a higher one."""
        return self._sent.is_repeat(event) or self._refused.is_repeat(event)

    def _take_token(self, now: float) -> bool:
        if self._tokens_at is not None:
            refill = (now - self._tokens_at) / 60.0 * self._rate
            self._tokens = min(float(self._rate), self._tokens + max(0.0, refill))
        self._tokens_at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def _send(self, event: AlertEvent) -> bool | None:
        """True when delivered, False when it must be tried again later, None when Slack refused the message. A hold
        counts from when the answer (or the failure) arrived: a 429 slack_sdk retried in place has slept one
        Retry-After before the answer that asks for the next one, and a timeout has waited ``request_timeout``."""
        try:
            response = self._client.send(text=fallback_text(event), blocks=blocks(event))
        except Exception as exc:  # noqa: BLE001 - whatever breaks in the chat path must not reach the loop
            self._failed(self._clock.monotonic(), f"{type(exc).__name__}: {self._redact(str(exc))}")
            return False
        now = self._clock.monotonic()
        if response.status_code == 200:
            self._recovered(now)
            self.delivered += 1
            return True
        body = self._redact(str(response.body or ""))[:200]
        if response.status_code == 400:
            self._refused_since = None  # Slack read the message: the webhook itself is accepted
            log.error(
                "Slack refused the alert %s %s (HTTP 400: %s) and would refuse it again: dropped it",
                event.kind,
                event.subject,
                body,
            )
            return None
        if response.status_code == 429:
            wait = retry_after_s(dict(response.headers or {}))
            self._failed(now, f"rate limited by Slack (HTTP 429): {body}", wait)
        elif response.status_code in (403, 404, 410):
            self._failed(now, f"HTTP {response.status_code}: {body}", refused=True)
        else:
            self._failed(now, f"HTTP {response.status_code}: {body}")
        return False

    def _failed(self, now: float, reason: str, retry_after_s: float | None = None, refused: bool = False) -> None:
        """``refused``: Slack refuses the webhook itself (its channel archived or gone, posting prohibited): only a
        new webhook helps, so the longest back-off applies and the log says so at error level, whenever the cause
        becomes a refusal, even in an outage that began otherwise (a 503, then 410s)."""
        self._failures += 1
        if retry_after_s is not None:
            hold = timedelta(seconds=retry_after_s)
        else:
            factor = _MAX_BACKOFF_FACTOR if refused else min(_MAX_BACKOFF_FACTOR, 2 ** (self._failures - 1))
            hold = self._backoff * factor
        self._hold_until = now + hold.total_seconds()
        started = self._outage_since is None
        if started:
            self._outage_since = now
        if refused and self._refused_since is None:
            self._refused_since = now
            log.error(
                "Slack refuses the alert webhook (%s): no alert gets through until the webhook is replaced. Create a "
                "new incoming webhook in Slack, put its URL in %s, and restart the agent (kubectl -n leadtime rollout "
                "restart deployment/leadtime with the shipped manifests): the URL is read only at start. Until then "
                "the alerts are kept and tried again every %s; the %d held now, and those raised meanwhile, are "
                "lost at the restart (conditions that still hold are raised again after it)",
                reason,
                self._webhook_source,
                hold,
                len(self._pending),
                extra={"pending": len(self._pending)},
            )
        elif started:
            log.warning(
                "Slack alerts are not getting through (%s); keeping them and trying again after %s",
                reason,
                hold,
                extra={"pending": len(self._pending)},
            )
        else:
            log.debug("Slack still unreachable (%s); next try after %s", reason, hold)

    def _recovered(self, now: float) -> None:
        if self._outage_since is not None:
            lasted = timedelta(seconds=round(now - self._outage_since, 3))
            log.warning("Slack alerts are getting through again after %s", lasted)
        self._outage_since = None
        self._refused_since = None
        self._failures = 0
        self._hold_until = None

    def _redact(self, text: str) -> str:
        return redact(text, self._secrets)


def build_slack_notifier(
    settings: AlertSettings, clock: Clock, environ: Mapping[str, str], url: str | None = None
) -> SlackNotifier | None:
    """A SlackNotifier wired as the settings say, or ``None`` when no webhook URL is configured."""
    url = url or webhook_url(settings, environ)
    if url is None:
        return None
    sdk_log = logging.Logger(f"{__name__}.sdk", logging.WARNING)
    sdk_log.parent = log
    sdk_log.addFilter(RedactingFilter([url]))
    protect_secret(url)
    client = WebhookClient(
        url,
        timeout=settings.request_timeout.total_seconds(),  # type: ignore[arg-type]  # urlopen takes float seconds
        logger=sdk_log,
        retry_handlers=[BoundedRateLimitRetryHandler(settings.max_retry_after.total_seconds())],
    )
    return SlackNotifier(
        client,
        clock,
        dedup_window=settings.dedup_window,
        rate_limit_per_minute=settings.rate_limit_per_minute,
        outage_backoff=settings.outage_backoff,
        max_pending=settings.max_pending,
        webhook_source=webhook_source(settings),
    )
