"""Where the Slack webhook URL comes from: the mounted file named in ``alerts.slack_webhook_url_file``, else the
environment variable named in ``alerts.slack_webhook_url_env``, and whether what is there is a webhook URL.

No Slack client is imported here: ``leadtime run`` reads the URL through this module before it builds its notifier
(``agent.notify.slack``), and ``leadtime validate-config --for run`` checks it through the same function where the
``daemon`` extra is not installed (``agent.extras``), so a file that passes the check is not refused by ``run`` for
its webhook. Errors name the configuration file and the key, never the secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from config.alerts import AlertSettings
from models import ConfigError, ConfigProblem


def webhook_url(settings: AlertSettings, environ: Mapping[str, str], source: str = "alerts") -> str | None:
    """The webhook URL from the mounted file named in the settings, else from the environment variable.

    ``None`` when neither is set (alerts then only go to the log). ``source`` is the configuration file the settings
    come from, named by the error. Errors never quote the secret.
    """
    if settings.slack_webhook_url_file is not None:
        key = "alerts.slack_webhook_url_file"
        try:
            url = Path(settings.slack_webhook_url_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            problem = ConfigProblem(
                key,
                f"cannot read the webhook URL file {settings.slack_webhook_url_file}: {type(exc).__name__}: "
                f"{exc.args[-1]}; mount the file there (the Secret holding the webhook URL), or remove the key to "
                f"alert to the log only",
            )
            raise ConfigError(source, [problem]) from None
        where = f"the file {settings.slack_webhook_url_file}"
    else:
        key = "alerts.slack_webhook_url_env"
        url = environ.get(settings.slack_webhook_url_env, "").strip()
        where = f"the environment variable {settings.slack_webhook_url_env}"
        if not url:
            return None
    if not url.startswith(("https://", "http://")):
        problem = ConfigProblem(
            key, f"{where} does not hold an http(s) webhook URL: put the whole URL there, starting with https://"
        )
        raise ConfigError(source, [problem])
    return url


def webhook_source(settings: AlertSettings) -> str:
    """Where the settings read the webhook URL from, as an error telling how to replace it should say."""
    if settings.slack_webhook_url_file is not None:
        return f"the file {settings.slack_webhook_url_file} (alerts.slack_webhook_url_file)"
    shipped = ""
    if settings.slack_webhook_url_env == "LEADTIME_SLACK_WEBHOOK_URL":
        shipped = "; the shipped manifests fill it from the Secret leadtime-slack, key webhook-url"
    return f"the environment variable {settings.slack_webhook_url_env} (alerts.slack_webhook_url_env{shipped})"
