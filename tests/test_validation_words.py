"""Validation errors in words: a union is one line for its field, and the naming rule is said, not its pattern."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from app.memories.schemas import MemoryIn
from app.validation_words import in_words, readable


def _error_of(model: type[BaseModel], body: dict[str, Any]) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    return caught.value


def test_a_metadata_value_that_is_no_member_of_the_union_is_one_line_naming_what_it_may_be() -> None:
    said = in_words(_error_of(MemoryIn, {"content": "x", "metadata": {"a": {"b": 1}, "ok": 1}}))
    assert (
        said == "metadata.a: a metadata value must be a string, a number, a boolean or null (not an object or a list)"
    )


def test_a_bad_name_is_told_the_rule_in_words_not_the_pattern() -> None:
    said = in_words(_error_of(MemoryIn, {"content": "x", "session": "bad name!"}))
    assert said == "session: may only contain letters, digits, '.', '-' and '_', never '__'"


def test_other_errors_are_kept_as_pydantic_says_them_and_in_order() -> None:
    said = in_words(_error_of(MemoryIn, {"content": 5, "tags": "x", "metadata": {"a": [1]}}))
    assert said.split("; ") == [
        "content: Input should be a valid string",
        "tags: Input should be a valid list",
        "metadata.a: a metadata value must be a string, a number, a boolean or null (not an object or a list)",
    ]


def test_a_union_outside_metadata_names_its_members_and_a_lone_member_is_kept() -> None:
    details = [
        {"key": "limit.int", "message": "Input should be a valid integer"},
        {"key": "limit.float", "message": "Input should be a valid number"},
        {"key": "limit.str", "message": "Input should be a valid string"},
        {"key": "name.str", "message": "Input should be a valid string"},
        "not a detail",
    ]
    assert readable(details) == [
        {"key": "limit", "message": "should be a number or a string"},
        {"key": "name.str", "message": "Input should be a valid string"},
        "not a detail",
    ]
