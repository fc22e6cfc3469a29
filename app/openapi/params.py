"""Query and path parameters whose rule the schema states and our own code checks (for its clearer messages)."""

from __future__ import annotations

from typing import Any

from litestar.params import Parameter

from app.identity import MAX_NAME, NAME_PATTERN

NAME_SCHEMA: dict[str, Any] = {"pattern": NAME_PATTERN, "minLength": 1, "maxLength": MAX_NAME}


def name_parameter(part: str, description: str | None = None) -> Any:
    """A session or agent name: documented with its pattern; a bad one gets 400 naming the part, from app.identity."""
    text = description or f"The {part} name: letters, digits, '.', '-' and '_' (never '__'), 1-{MAX_NAME} characters."
    return Parameter(description=text, schema_extra=NAME_SCHEMA)
