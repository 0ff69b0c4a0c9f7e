"""The ``leadtime`` command line. Each subcommand lives in ``agent.commands.<name>``.

Options that apply to every subcommand (``--log-level``, ``--log-format``) are accepted before or after it, and
after a nested one (``config schema``, ``ledger budgets``) too.

Exit codes: 0 success, 1 unexpected failure, 2 bad input (configuration, trace, arguments, or a command that
needs the ``daemon`` extra where it is not installed: ``agent.extras``) with a message a person can act on, never a
traceback, 3 the metric source (Prometheus) cannot be reached or has no data for any demand class, in one line.

Every log handler gets a redacting filter (``agent.log_redaction``) and error messages are redacted before they
are printed, so no credential or webhook path reaches the terminal or the log, whatever quotes it.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from importlib import import_module
from typing import Any

from agent.extras import missing_extra
from agent.log_format import LOG_FORMATS, configure_logging
from agent.log_redaction import install_log_redaction, redacting_excepthook
from agent.version import version_text
from models import ConfigError, LeadtimeError, MetricSourceUnavailable
from models.redaction import redact

COMMANDS = (
    "backtest",
    "config_reference",
    "export_trace",
    "ledger",
    "recommend",
    "run",
    "simulate",
    "validate_config",
)
EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, EXIT_SOURCE_UNAVAILABLE = 0, 1, 2, 3
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
DEFAULTS = {"log_level": "WARNING", "log_format": "text"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="leadtime", description="Forecasting-driven autoscaling for AI accelerators.")
    parser.add_argument("--version", action="version", version=version_text())
    _add_common_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        import_module(f"agent.commands.{name}").register(sub)
    _add_common_options_below(sub)
    return parser


def _add_common_options_below(sub: argparse._SubParsersAction[Any]) -> None:
    """Every subcommand, and every subcommand of those (``config schema``, ``ledger budgets``), takes them."""
    for subparser in sub.choices.values():
        _add_common_options(subparser)
        for action in subparser._actions:
            if isinstance(action, argparse._SubParsersAction):
                action.metavar = action.metavar or "{" + ",".join(action.choices) + "}"  # not its dest in errors
                _add_common_options_below(action)


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: an option given after the subcommand must not be reset by the subparser's default.
    parser.add_argument("--log-level", choices=LOG_LEVELS, default=argparse.SUPPRESS, help="default: WARNING")
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=argparse.SUPPRESS,
        help="text (default) or json: one JSON object per line, with the structured fields of each record",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name, default in DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, default)
    configure_logging(args.log_level, args.log_format)
    install_log_redaction()
    sys.excepthook = redacting_excepthook  # an unexpected failure (exit 1) prints its traceback redacted too
    warnings.formatwarning = _warning_line
    try:
        code: int = args.handler(args)
    except ConfigError as exc:
        print(f"leadtime: {redact(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MetricSourceUnavailable as exc:
        print(f"leadtime: {redact(str(exc))}", file=sys.stderr)
        return EXIT_SOURCE_UNAVAILABLE
    except LeadtimeError as exc:
        print(f"leadtime: {redact(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("leadtime: interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:
        if (message := missing_extra(exc)) is None:
            raise
        print(f"leadtime: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return code


def _warning_line(message: Warning | str, category: type[Warning], *_: object, **__: object) -> str:
    """A warning for the person at the terminal (a deprecated configuration value), in one line: not the file and
    source line of the library that raised it."""
    return f"leadtime: warning: {redact(str(message))}\n"


if __name__ == "__main__":
    sys.exit(main())
