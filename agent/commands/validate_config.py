"""``leadtime validate-config FILE [--for run|recommend]``: check a configuration file and say what is wrong.

Without ``--for`` it checks what every command needs (the schema, its bounds and the cross-field rules).
``--for run`` adds what the daemon needs before it connects to anything (a ``prometheus`` section, a ``cloud``
section for every pool that is not on-prem); ``--for recommend`` adds the ``prometheus`` section. A file that
passes ``--for run`` is not rejected by ``leadtime run`` for its content.
"""

from __future__ import annotations

import argparse
from typing import Any

from config import load_settings
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
        help="also check what this command needs (run: prometheus and cloud sections; recommend: prometheus)",
    )
    parser.set_defaults(handler=run)


def check_for(settings: Settings, source: str, purpose: str) -> None:
    if purpose == "run":
        from agent.daemon.live_settings import check_live_settings  # the daemon's own check, not a copy of it

        check_live_settings(settings, source)
    elif purpose == "recommend" and settings.prometheus is None:
        raise ConfigError(
            source, [ConfigProblem("prometheus", "recommend reads Prometheus: add a prometheus section with its url")]
        )


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args.file)
    check_for(settings, args.file, args.purpose)
    purpose = "" if args.purpose == "any" else f" for {args.purpose}"
    print(
        f"{args.file}: ok{purpose} ({len(settings.demand_classes)} demand classes, {len(settings.pools)} pools, "
        f"{len(settings.budgets)} budgets)"
    )
    return 0
