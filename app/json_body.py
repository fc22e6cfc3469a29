"""Reading a JSON request body, the one place it happens for every route that takes one."""

from __future__ import annotations

import functools
import types
import typing
from datetime import datetime
from typing import Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator


def _a_json_time(value: Any) -> Any:
    if value is not None and not isinstance(value, str | datetime):
        raise ValueError("a time is an RFC 3339 string, e.g. 2026-11-27T10:00:00Z")
    return value


# JSON has no time type: one arrives as a string. A lax pydantic datetime also took a number (seconds since the
# epoch), which the schema (``format: date-time``) does not allow; strict mode would refuse the string itself.
JsonTime = BeforeValidator(_a_json_time)


def _scalar(annotation: Any) -> type | None:
    """bool, int or float when ``annotation`` is one of them (or optional, or annotated), else None."""
    options = [a for a in typing.get_args(annotation) if a is not type(None)] if typing.get_args(annotation) else []
    if typing.get_origin(annotation) is typing.Annotated:
        return _scalar(typing.get_args(annotation)[0])
    if options and typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return _scalar(options[0]) if len(options) == 1 else None
    return annotation if annotation in (bool, int, float) else None


def _exact_json_type(expected: type, value: Any) -> bool:
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:  # JSON Schema counts 211.0 as an integer, and so does pydantic
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    return isinstance(value, int | float) and not isinstance(value, bool)


class JsonIn(BaseModel):
    """A request body: no field the model does not have, and JSON's types as the schema states them.

    Litestar validates bodies in pydantic's lax mode (whatever a model's config says), where ``false`` is the number
    0, ``1`` is true and ``"5"`` is 5: a body the schema calls invalid was taken (``threshold: false``)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _json_types(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, expected in _scalar_fields(cls).items():
                value = data.get(key)
                if value is not None and not _exact_json_type(expected, value):
                    kind = {bool: "a boolean", int: "an integer", float: "a number"}[expected]
                    raise ValueError(f"{key}: must be {kind}, not {type(value).__name__} {value!r}")
        return data


@functools.cache
def _scalar_fields(model: type[BaseModel]) -> dict[str, type]:
    """The body keys of ``model`` whose values must be one JSON scalar type, with that type: read from its
    annotations once per model, instead of walking every field's annotation (some 35 calls into ``typing``) on every
    request."""
    fields = ((field.alias or name, _scalar(field.annotation)) for name, field in model.model_fields.items())
    return {key: expected for key, expected in fields if expected is not None}
