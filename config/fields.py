"""Field types shared by configuration sections that live in their own modules.

``config.schema`` defines the same ``Duration`` for its own sections; sections in separate modules import these
so that ``config.schema`` can import them without a cycle.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer

from config.durations import format_duration, parse_duration

Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
]


class Section(BaseModel):
    """A frozen settings group that rejects unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
