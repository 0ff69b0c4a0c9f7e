"""How log records are written: ``text`` for a terminal, ``json`` (one object per line) for log collectors.

Both keep the structured fields that modules pass with ``extra=`` (the Slack notifier's retry, the ledger's
pool, the planner's memory): ``text`` appends them as ``key=value``, ``json`` as fields of the object. String
fields are redacted like the message, so a credential passed as a field never reaches the log either.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from models.redaction import redact

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a caller passed with ``extra=``, JSON-safe and redacted."""
    fields: dict[str, Any] = {}
    for key, value in vars(record).items():
        if key in _STANDARD or key.startswith("_"):
            continue
        if isinstance(value, bool | int) or value is None or (isinstance(value, float) and math.isfinite(value)):
            fields[key] = value
        else:
            fields[key] = redact(str(value))
    return fields


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = extra_fields(record)
        if not fields:
            return line
        head, sep, rest = line.partition("\n")  # keep a traceback below the fields
        tail = " ".join(
            f"{key}={json.dumps(value) if isinstance(value, str) and ' ' in value else value}"
            for key, value in fields.items()
        )
        return f"{head} {tail}{sep}{rest}"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in extra_fields(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, allow_nan=False, default=str)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record is emitted (it may be replaced after start-up)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: object) -> None:
        pass


def configure_logging(level: str, log_format: LogFormat) -> None:
    """Our stderr handler on the root logger with the chosen format, replacing one set before; handlers that
    others installed (a test harness, an embedding program) are left alone."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, StderrHandler)]:
        root.removeHandler(old)
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level)
