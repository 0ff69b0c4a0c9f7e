"""``leadtime validate-config FILE``: check a configuration file and say what is wrong with it."""

from __future__ import annotations

import argparse
from typing import Any

from config import load_settings


def register(sub: Any) -> None:
    parser = sub.add_parser("validate-config", help="check a configuration file")
    parser.add_argument("file", help="YAML configuration file")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args.file)
    print(
        f"{args.file}: ok ({len(settings.demand_classes)} demand classes, {len(settings.pools)} pools, "
        f"{len(settings.budgets)} budgets)"
    )
    return 0
