"""Alert delivery settings: where the Slack webhook URL comes from, de-duplication and rate limits.

The webhook URL itself is a secret and never appears in the configuration file: it is read from the environment
variable named here, or from a mounted file (a Kubernetes Secret volume) whose path is named here.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import AfterValidator, Field

from config.durations import at_least_one_second
from config.fields import Duration, Section

# A Slack request with a timeout of 0 fails at once (the socket times out before it connects), and a back-off of
# 0 retries a failing Slack at every alert: both are refused below a second.
_AtLeastOneSecond = Annotated[Duration, AfterValidator(at_least_one_second)]


class AlertSettings(Section):
    slack_webhook_url_env: str = Field(default="LEADTIME_SLACK_WEBHOOK_URL", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    slack_webhook_url_file: str | None = Field(default=None, min_length=1)
    dedup_window: Duration = timedelta(hours=1)
    resolve_after: Duration = timedelta(minutes=5)
    rate_limit_per_minute: int = Field(default=10, ge=1)
    max_retry_after: Duration = timedelta(seconds=10)
    request_timeout: _AtLeastOneSecond = timedelta(seconds=5)
    outage_backoff: _AtLeastOneSecond = timedelta(minutes=1)
    max_pending: int = Field(default=100, ge=1)
    shutdown_flush_timeout: Duration = timedelta(seconds=10)
    stalled_after_lead_times: float = Field(default=2.0, gt=0.0)
