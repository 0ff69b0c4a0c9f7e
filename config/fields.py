"""Field types shared by configuration sections that live in their own modules.

``config.schema`` defines the same ``Duration`` for its own sections; sections in separate modules import these
so that ``config.schema`` can import them without a cycle.
"""

from __future__ import annotations

import types
from datetime import timedelta
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, ValidationInfo, field_validator

from config.durations import format_duration, parse_duration

Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
]


class NumbersOnly(BaseModel):
    """Numeric settings refuse booleans. pydantic reads ``true`` as 1 for an int or a float; in a configuration
    file that is a slip (a price of $1 from ``true``, or ``yes``), so it is an error that names the key. Applies to
    number fields, and to the numbers in their lists and mappings. Text that reads as a number stays accepted:
    PyYAML loads ``1e6`` (an exponent without a sign) as the string ``'1e6'``, and a cap written so is meant."""

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_are_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None:
            _check_number(field.annotation, value)
        return value


class Section(NumbersOnly):
    """A frozen settings group that rejects unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _check_number(annotation: Any, value: Any) -> None:
    if _is_number(annotation):
        if isinstance(value, bool):
            raise ValueError(f"must be a number, got {value!r} (a YAML true/false)")
        return
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        numbers = [a for a in args if a is not type(None)]
        if len(numbers) == 1:
            _check_number(numbers[0], value)
    elif origin in (tuple, list) and args and isinstance(value, list | tuple):
        for item in value:
            _check_number(args[0], item)
    elif origin is dict and len(args) == 2 and isinstance(value, dict):
        for item in value.values():
            _check_number(args[1], item)


def _is_number(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        return _is_number(get_args(annotation)[0])
    return annotation in (int, float)
