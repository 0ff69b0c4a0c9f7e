"""``leadtime validate-config FILE [--for run|recommend]``: check a configuration file and say what is wrong.

Without ``--for`` it checks what every command needs (the schema, its bounds and the cross-field rules).
``--for run`` adds what the daemon needs before it connects to anything (a ``prometheus`` section, a ``cloud``
section for every pool that is not on-prem, not the install manifests' example configuration in enforce mode, a
ledger that keeps a budget's spend across restarts) and the Slack webhook URL's source, read from this process's
environment as ``run`` reads it (``alerts.slack_webhook_url_file`` readable, or ``alerts.slack_webhook_url_env``
unset or an http(s) URL); ``--for recommend`` adds the ``prometheus`` section. Both read the files Prometheus is
queried with (``prometheus.bearer_token_file``, and ``prometheus.ca_file`` for an https URL) as its client reads
them. ``leadtime run`` calls ``check_for(..., "run")`` itself before it connects, so a file that passes ``--for
run`` is not rejected by ``run`` for its content, and a file that fails is
refused by both with the same lines, every problem at once. Outside a pod, leader election off passes with a note on
stderr: a pod refuses it unless it declares itself the only replica.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from config import load_settings
from config.install_example import refuse_example_in_enforce
from config.rules import memory_ledger_problems
from config.schema import Settings
from models import ConfigError, ConfigProblem

PURPOSES = ("any", "simulate", "recommend", "run")


def register(sub: Any) -> None:
    parser = sub.add_parser("validate-config", help="check a configuration file")
    parser.add_argument("file", help="YAML configuration file")
    parser.add_argument(
        "--for",
        dest="purpose",
        choices=PURPOSES,
        default="any",
        help=(
            "also check what this command needs (run: prometheus and cloud sections, the Slack webhook URL; recommend: "
            "prometheus)"
        ),
    )
    parser.set_defaults(handler=run)


def check_for(
    settings: Settings,
    source: str,
    purpose: str,
    environ: Mapping[str, str] = os.environ,
    mode: str | None = None,
) -> None:
    """Raise ConfigError naming every problem ``purpose`` finds; ``mode`` is the run's (``--mode``), by default the
    file's ``daemon.mode``."""
    if purpose == "run":
        # The daemon's own checks, not copies of them; every problem is reported at once.
        from agent.daemon.live_settings import check_live_settings
        from agent.notify.webhook import webhook_url

        problems: list[ConfigProblem] = []
        try:
            check_live_settings(settings, source, environ)
        except ConfigError as exc:
            problems.extend(exc.problems)
        problems.extend(memory_ledger_problems(settings))  # a budget's spend must outlive a restart
        try:
            webhook_url(settings.alerts, environ, source)  # a live run refuses it at start (a rehearsal warns)
        except ConfigError as exc:
            problems.extend(exc.problems)
        try:  # the install manifests' example never acts
            refuse_example_in_enforce(settings, mode or settings.daemon.mode, source)
        except ConfigError as exc:
            problems.extend(exc.problems)
        problems.extend(prometheus_file_problems(settings))
        if problems:
            raise ConfigError(source, problems)
    elif purpose == "recommend":
        if settings.prometheus is None:
            raise ConfigError(
                source,
                [ConfigProblem("prometheus", "recommend reads Prometheus: add a prometheus section with its url")],
            )
        problems = prometheus_file_problems(settings)
        if problems:
            raise ConfigError(source, problems)


def prometheus_file_problems(settings: Settings) -> list[ConfigProblem]:
    """The files Prometheus is queried with, read as its client reads them: ``prometheus.bearer_token_file`` (read
    before every query, refused when empty) and, for an https URL, ``prometheus.ca_file`` (a CA bundle, or a
    directory of them). Never quotes a token."""
    prometheus = settings.prometheus
    if prometheus is None:
        return []
    problems: list[ConfigProblem] = []
    token_file = prometheus.bearer_token_file
    if token_file:
        key = "prometheus.bearer_token_file"
        fix = "mount the file there (the Secret or service-account token Prometheus accepts), or remove the key"
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(
                ConfigProblem(
                    key,
                    f"cannot read the bearer token file {token_file}: {type(exc).__name__}: {exc.args[-1]}; {fix} "
                    "where Prometheus asks for no token",
                )
            )
        else:
            if not token:
                problems.append(ConfigProblem(key, f"the bearer token file {token_file} is empty; {fix}"))
    ca_file = prometheus.ca_file
    if ca_file and prometheus.url.startswith("https://"):
        try:
            if Path(ca_file).is_dir():
                os.listdir(ca_file)
            else:
                Path(ca_file).read_bytes()
        except OSError as exc:
            problems.append(
                ConfigProblem(
                    "prometheus.ca_file",
                    f"cannot read the CA file {ca_file}: {type(exc).__name__}: {exc.args[-1]}; mount the file there "
                    "(the CA bundle that signed the Prometheus server's certificate), or remove the key to verify "
                    "it with the system's CAs",
                )
            )
    return problems


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args.file)
    check_for(settings, args.file, args.purpose)
    purpose = "" if args.purpose == "any" else f" for {args.purpose}"
    print(
        f"{args.file}: ok{purpose} ({len(settings.demand_classes)} demand classes, {len(settings.pools)} pools, "
        f"{len(settings.budgets)} budgets)"
    )
    if args.purpose == "run":
        from agent.daemon.live_settings import election_off_note

        note = election_off_note(settings, os.environ)
        if note is not None:
            print(note, file=sys.stderr)
    return 0
