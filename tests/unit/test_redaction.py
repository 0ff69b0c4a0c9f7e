"""Redaction by shape: every awkward way a credential or a webhook path turns up in text is hidden, the rest of
the text is kept, and redacting twice changes nothing. Also the logging filter the CLI installs."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.cli import main
from agent.daemon.health import HealthState
from agent.log_redaction import RedactingFilter, install_log_redaction, protect_secret
from agent.notify.slack_message import blocks, fallback_text
from models import AlertEvent, AlertKind, Severity
from models.redaction import REDACTED, redact, redact_tree, secret_fragments
from tests.conftest import ROOT

HOOK = "https://hooks.slack.com/services/T0LEADTIME/B0ALERTS/s3cr3tT0k3nN0tF0rL0gs"
SECRETS = ("hunter2", "s3cr3t", "T0k3nN0tF0rL0gs", "eyJhbGciOi", "abcDEF123456", "xoxb-1234", "Zm9vOmJhcg")

CASES = [
    # (text, what must survive)
    ("GET https://admin:hunter2@prom.example:9090/api/v1/query failed", "prom.example:9090/api/v1/query failed"),
    ("url 'https://admin:hunter2 x@prom:9090' is not valid", "@prom:9090' is not valid"),
    ("http://hunter2@prom:9090/", "@prom:9090/"),
    ("https://user:p@ss:hunter2@prom/", "@prom/"),
    (HOOK, "hooks.slack.com/"),
    ("error posting to " + HOOK.upper().replace("HTTPS", "https").replace("HOOKS.SLACK.COM", "hooks.slack.com"), ""),
    ("URL can't contain control characters. '/services/T0LEADTIME/B0ALERTS/s3cr3t T0k3nN0tF0rL0gs'", "control"),
    ("'/services/T0LEADTIME/B0ALERTS/s3cr3t\\tT0k3nN0tF0rL0gs' (found at least '\\t')", "(found at least"),
    ("/services/T0LEADTIME/B0ALERTS/s3cr3t%20T0k3nN0tF0rL0gs", "/services/"),
    ("hooks.slack.com%2Fservices%2FT0%2FB0%2Fs3cr3t", "hooks.slack.com"),
    ("https://hooks.slack.com/workflows/T0AB/A0CD/123/s3cr3t", "hooks.slack.com/"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x", "Authorization: Bearer"),
    ("{'Authorization': 'Basic Zm9vOmJhcg=='}", "'Authorization': 'Basic"),
    ('headers={"authorization": "abcDEF123456"}', "headers="),
    ("x-api-key=abcDEF123456 sent", "sent"),
    ("sending with bearer eyJhbGciOi.J9", "sending with bearer"),
    ("https://prom/api?query=up&token=abcDEF123456&step=60", "&step=60"),
    ("https://maps.example/api?key=abcDEF123456", "https://maps.example/api?key="),
    ("retrying: password=hunter2, attempt 2", "attempt 2"),
    ("api_key=abcDEF123456", "api_key="),
    ('{"password": "hunter2", "user": "admin"}', '"user": "admin"'),
    ("slack said xoxb-1234: access_token=xoxb-1234", "slack said"),
]


@pytest.mark.parametrize(("text", "kept"), CASES)
def test_secret_shapes_are_hidden_and_the_rest_is_kept(text: str, kept: str) -> None:
    cleaned = redact(text)
    leaked = [s for s in SECRETS if s.lower() in cleaned.lower()]
    assert not leaked, cleaned
    assert REDACTED in cleaned
    assert kept in cleaned
    assert redact(cleaned) == cleaned


@pytest.mark.parametrize(
    "text",
    [
        "scale-up pool=a100 from 3 to 5 units: forecast q0.9 12.0 over 15m",
        "skip pool=a100 reason=cooldown detail='changed direction 2m ago'",
        "https://prometheus.monitoring.svc:9090/api/v1/query_range failed: HTTP 503",
        "PATCH /api/v1/namespaces/ml/services/leadtime-metrics returned 404",
        "resize key=a100:2024-03-05T10:00:00+00:00:5 accepted",
        "the bearer token file is re-read before every query; Basic checks passed",
        "rate limited by Slack (HTTP 429): token bucket empty",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_a_configured_secret_is_hidden_in_any_fragment() -> None:
    mangled = "https://proxy.example/alerts/aB3dEfGh12/ZyXw 9876"
    fragments = secret_fragments(mangled)
    assert "aB3dEfGh12" in fragments and "ZyXw" in fragments and "9876" in fragments
    assert "proxy.example" not in fragments
    text = "POST '/alerts/aB3dEfGh12/ZyXw 9876' failed, then 'ZyXw' alone, truncated 'aB3dEfGh12"
    cleaned = redact(text, fragments)
    assert all(f not in cleaned for f in ("aB3dEfGh12", "ZyXw", "9876"))
    assert cleaned.startswith("POST '/") and "' failed, then '" in cleaned


def test_documents_are_redacted_string_by_string() -> None:
    document = {
        "prometheus": "https://admin:hunter2@prom:9090",
        "config": {"settings": {"prometheus": {"url": "https://admin:hunter2@prom:9090"}}},
        "problems": ["GET https://admin:hunter2@prom/api failed"],
        "numbers": [1, 2.5, None, True],
        "pair": ("token=abcDEF123456", 3),
    }
    cleaned = redact_tree(document)
    assert "hunter2" not in repr(cleaned) and "abcDEF123456" not in repr(cleaned)
    assert cleaned["numbers"] == [1, 2.5, None, True]
    assert cleaned["pair"] == ("token=<redacted>", 3)
    assert cleaned["prometheus"] == "https://<redacted>@prom:9090"


@pytest.fixture
def root_stream() -> Iterator[io.StringIO]:
    """A plain handler on the root logger, like the one the CLI configures; removed afterwards."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield stream
    finally:
        root.removeHandler(handler)


def test_the_filter_redacts_messages_arguments_and_tracebacks(root_stream: io.StringIO) -> None:
    install_log_redaction()
    protect_secret("https://chat.example/hook/aB3dEfGh12")
    log = logging.getLogger("leadtime.test.redaction")
    log.error("posting to %s failed", "https://chat.example/hook/aB3dEfGh12")
    log.warning("GET %s: %s", "https://admin:hunter2@prom/", {"Authorization": "Bearer eyJhbGciOi.x"})
    try:
        raise ValueError("URL can't contain control characters. '/services/T0LEADTIME/B0ALERTS/s3cr3t T0k3nN0tF0rL0gs'")
    except ValueError:
        log.exception("send failed")
    written = root_stream.getvalue()
    assert "posting to" in written and "send failed" in written and "Traceback" in written
    assert all(s not in written for s in ("aB3dEfGh12", "hunter2", "eyJhbGciOi", "s3cr3t", "T0k3nN0tF0rL0gs"))


def test_installing_twice_keeps_one_filter_per_handler(root_stream: io.StringIO) -> None:
    first, second = install_log_redaction(), install_log_redaction()
    assert first == second
    handler = logging.getLogger().handlers[-1]
    assert sum(isinstance(f, RedactingFilter) for f in handler.filters) == 1


def test_the_cli_installs_the_filter_and_redacts_its_error_messages(
    root_stream: io.StringIO, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "leadtime.yaml"
    config.write_text(
        "demand_classes: [{name: a, family: gpu}]\n"
        "pools: [{id: p, kind: on-prem, chips_per_unit: 8, max_units: 2, price_per_chip_hour_usd: 1,"
        " lead_time: 1m, serves: [a]}]\n"
        'prometheus: {url: "https://admin:hunter2 x@prom:9090"}\n',
        encoding="utf-8",
    )
    assert main(["validate-config", str(config)]) == 2
    printed = capsys.readouterr().err
    assert "prometheus.url" in printed and "hunter2" not in printed
    logging.getLogger("leadtime.test.cli").warning("GET https://admin:hunter2@prom/ failed")
    assert "hunter2" not in root_stream.getvalue()
    assert "https://<redacted>@prom/ failed" in root_stream.getvalue()


def test_daemon_outputs_are_redacted() -> None:
    """What the daemon serves on /readyz and sends to Slack quotes errors; their credentials are hidden."""
    now = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
    failure = "MetricsUnavailable: GET https://admin:hunter2@prom/api/v1/query_range: HTTP 503"
    health = HealthState(timedelta(minutes=5))
    health.tick_failed(now, failure)
    detail = health.readiness(now).detail
    assert "HTTP 503" in detail and "hunter2" not in detail
    alert = AlertEvent(AlertKind.TICK_FAILED, Severity.WARNING, now, "replica/a", failure, {"detail": failure})
    sent = json.dumps({"text": fallback_text(alert), "blocks": blocks(alert)})
    assert "HTTP 503" in sent and "hunter2" not in sent


def test_an_unexpected_failure_prints_its_traceback_redacted(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "import agent.commands.validate_config as command\n"
        "def fail(args):\n"
        "    raise RuntimeError('GET https://admin:hunter2@prom.example/api failed')\n"
        "command.run = fail\n"
        "from agent.cli import main\n"
        "sys.exit(main(['validate-config', 'leadtime.yaml']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert done.returncode == 1
    assert "RuntimeError: GET https://<redacted>@prom.example/api failed" in done.stderr
    assert "Traceback" in done.stderr and "hunter2" not in done.stderr
