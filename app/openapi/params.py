"""Query and path parameters whose rule the schema states and our own code checks (for its clearer messages)."""

from __future__ import annotations

import typing
from typing import Any

from litestar import Request
from litestar.params import Parameter

from app.errors import ValidationFailed
from app.identity import MAX_NAME, NAME_PATTERN

NAME_SCHEMA: dict[str, Any] = {"pattern": NAME_PATTERN, "minLength": 1, "maxLength": MAX_NAME}


def name_parameter(part: str, description: str | None = None) -> Any:
    """A session or agent name: documented with its pattern; a bad one gets 400 naming the part, from app.identity."""
    text = description or f"The {part} name: letters, digits, '.', '-' and '_' (never '__'), 1-{MAX_NAME} characters."
    return Parameter(description=text, schema_extra=NAME_SCHEMA)


def _query_name(name: str, parameter: Any) -> str:
    kwarg = parameter.kwarg_definition
    return str(getattr(kwarg, "query", None) or name)


def _null_is_a_word_for(annotation: Any) -> bool:
    """Whether the text ``null`` is a value of ``annotation``: a string can spell it; a number or a choice cannot."""
    options = typing.get_args(annotation) or (annotation,)
    for option in options:
        if option is str or (typing.get_origin(option) is typing.Literal and "null" in typing.get_args(option)):
            return True
        if typing.get_args(option) and _null_is_a_word_for(option):
            return True
    return False


async def refuse_null_words(request: Request[Any, Any, Any]) -> None:
    """``?after=null`` is not a number: 422 naming the parameter.

    Litestar's query parsing reads the word ``null`` as "left out" for an optional parameter, so an integer, a boolean
    or a choice documented without null took it silently (schemathesis: ``scope=null`` accepted). A string parameter
    keeps it: ``null`` is a fine session name."""
    if "null" not in request.query_params.values():
        return
    parameters = request.route_handler.parsed_fn_signature.parameters
    by_query_name = {_query_name(name, p): p for name, p in parameters.items()}
    for key, value in request.query_params.multi_items():
        parameter = by_query_name.get(key)
        if value == "null" and parameter is not None and not _null_is_a_word_for(parameter.annotation):
            raise ValidationFailed(f"{key}: null is not a value of this parameter; leave it out instead", field=key)
