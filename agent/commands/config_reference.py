"""``leadtime config schema`` prints the configuration's JSON Schema; ``leadtime config reference`` prints the
Markdown reference that ``docs/configuration.md`` holds. Both are generated from the schema (``config.reference``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from config.reference import reference_markdown, schema_text


def register(sub: Any) -> None:
    parser = sub.add_parser("config", help="print the configuration's JSON Schema or its Markdown reference")
    what = parser.add_subparsers(dest="what", required=True)
    schema = what.add_parser("schema", help="JSON Schema of a configuration file, for editors and CI checks")
    schema.set_defaults(handler=_print(schema_text))
    reference = what.add_parser("reference", help="Markdown reference of every key (docs/configuration.md)")
    reference.set_defaults(handler=_print(reference_markdown))


def _print(render: Any) -> Any:
    def run(_: argparse.Namespace) -> int:
        sys.stdout.write(render())
        return 0

    return run
