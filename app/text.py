"""The one rule for every text Engram stores (memory content, tags, metadata, change summaries, ...).

What any of our databases and indexes can hold: no NUL characters (PostgreSQL refuses them) and nothing that is not
Unicode (a lone surrogate, which JSON can spell as ``\\ud800``, cannot be written as UTF-8). Checked where input enters
(the REST schemas and MCP arguments, so the caller hears which field) and again in the services, so that every path
into storage applies the same rule.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from app.column_limits import MAX_INT64, MIN_INT64
from app.errors import ValidationFailed

if TYPE_CHECKING:  # only a type: the services (and `engram oauth clients list`) check text without pydantic
    from pydantic.json_schema import JsonDict

MAX_METADATA_KEYS = 50
MAX_METADATA_KEY_CHARS = 64
# The whole metadata object as JSON: it rides in the index payload of every point, so it stays small.
MAX_METADATA_CHARS = 4000


# The rule as JSON Schema says it (a lone surrogate cannot be written in a schema, nor sent as UTF-8 anyway): for the
# document, so that a client or a fuzzer knows which text is refused. ``NOT_BLANK`` also wants a non-space character.
NO_NUL_SCHEMA: JsonDict = {"pattern": "^[^\\x00]*$"}
NOT_BLANK_SCHEMA: JsonDict = {"pattern": "^[^\\x00]*[^\\s\\x00][^\\x00]*$"}


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored, or None."""
    if "\x00" in value:
        return "must not contain NUL characters (U+0000)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode text (it holds a lone surrogate)"
    return None


def check_text(value: str, field: str) -> str:
    """``value`` if it can be stored; ValidationFailed naming ``field`` otherwise."""
    problem = text_problem(value)
    if problem:
        raise ValidationFailed(f"{field} {problem}", field=field)
    return value


def metadata_problem(metadata: Mapping[str, Any]) -> str | None:
    """Why a metadata object cannot be stored, or None: key count and form, value types, text, total size."""
    if not isinstance(metadata, Mapping):
        return "metadata must be an object"
    if len(metadata) > MAX_METADATA_KEYS:
        return f"metadata has {len(metadata)} keys; at most {MAX_METADATA_KEYS}"
    for key, value in metadata.items():
        # '.' separates a path, and the index cannot name a key holding '"' or '\\' in a filter.
        if not isinstance(key, str) or not key or len(key) > MAX_METADATA_KEY_CHARS or any(c in key for c in '."\\'):
            rule = f"1-{MAX_METADATA_KEY_CHARS} characters without '.', '\"' or '\\'"
            return f"metadata key {str(key)[:80]!r} must be {rule}"
        if problem := text_problem(key):
            return f"metadata key {key[:80]!r} {problem}"
        if isinstance(value, str) and (problem := text_problem(value)):
            return f"metadata value of {key!r} {problem}"
        if isinstance(value, int) and not MIN_INT64 <= value <= MAX_INT64:
            # Stored as JSON, but compared in SQL and in the index, where a number is at most 64 bits.
            return f"metadata value of {key!r} must be a whole number between {MIN_INT64} and {MAX_INT64}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"metadata value of {key!r} must be a finite number"
        if value is not None and not isinstance(value, str | int | float | bool):
            return f"metadata value of {key!r} must be a string, number, boolean or null"
    size = len(json.dumps(metadata, ensure_ascii=False))
    if size > MAX_METADATA_CHARS:
        return f"metadata is {size} characters as JSON; at most {MAX_METADATA_CHARS}"
    return None


def check_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    if problem := metadata_problem(metadata):
        raise ValidationFailed(problem, field="metadata")
    return dict(metadata)


def pydantic_text(value: str) -> str:
    """For ``AfterValidator``: pydantic reports a ValueError against the field it came from."""
    if problem := text_problem(value):
        raise ValueError(problem)
    return value


def pydantic_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    if problem := metadata_problem(metadata):
        raise ValueError(problem)
    return metadata
