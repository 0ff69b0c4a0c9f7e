"""Secrets never reach a log line: a logging filter that redacts every record (message, arguments, traceback and
stack) with ``models.redaction.redact`` before any handler formats it.

The CLI installs one filter on every handler of the root logger (``install_log_redaction``), so records of any
logger, ours or a library's, are redacted whatever their level. A component that learns a secret at run time (the
Slack notifier, its webhook URL) hands it to ``protect_secret``, and from then on any fragment of it is hidden too.
An exception nobody caught is printed by ``redacting_excepthook``, redacted the same way.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Iterable
from types import TracebackType

from models.redaction import redact, secret_fragments

_FORMATTER = logging.Formatter()


class RedactingFilter(logging.Filter):
    """Rewrites a record in place so that every handler after it sees the redacted text; never drops a record."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._fragments: tuple[str, ...] = ()
        for secret in secrets:
            self.protect(secret)

    def protect(self, secret: str) -> None:
        """Hide ``secret`` (and each fragment of its path and query) from now on."""
        known = set(self._fragments) | set(secret_fragments(secret))
        self._fragments = tuple(sorted(known, key=lambda p: (-len(p), p)))

    def redact(self, text: str) -> str:
        return redact(text, self._fragments)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the format: redact what is there
            message = f"{record.msg} {record.args}"
        cleaned = self.redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = _FORMATTER.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> list[RedactingFilter]:
    """A redacting filter on every handler of ``logger`` (default: the root logger), at most one per handler.
    Returns the filters in place, so a caller can protect secrets it learns later."""
    target = logger or logging.getLogger()
    installed: list[RedactingFilter] = []
    for handler in target.handlers:
        existing = [f for f in handler.filters if isinstance(f, RedactingFilter)]
        if existing:
            installed.extend(existing)
            continue
        redacting = RedactingFilter()
        handler.addFilter(redacting)
        installed.append(redacting)
    return installed


def protect_secret(secret: str, logger: logging.Logger | None = None) -> None:
    """Hide ``secret`` in every redacting filter installed on the handlers of ``logger`` (default: the root)."""
    target = logger or logging.getLogger()
    for handler in target.handlers:
        for installed in handler.filters:
            if isinstance(installed, RedactingFilter):
                installed.protect(secret)


def redacting_excepthook(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None, logger: logging.Logger | None = None
) -> None:
    """``sys.excepthook``: the traceback of an uncaught exception, printed to stderr with secrets redacted."""
    text = "".join(traceback.format_exception(kind, value, tb))
    target = logger or logging.getLogger()
    fragments = [f for h in target.handlers for f in h.filters if isinstance(f, RedactingFilter)]
    sys.stderr.write(fragments[0].redact(text) if fragments else RedactingFilter().redact(text))
