"""Validation errors in words a client can act on, the same on every route: one line per value that is wrong.

Two of pydantic's own messages name nothing a client wrote: a value that matched no member of a union is reported
once per member (``metadata.a.str: Input should be a valid string; metadata.a.int: ...``), and a name that breaks
the naming rule shows the rule's regular expression. Both are said in words here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from app.identity import NAME_PATTERN, NAME_RULE

# How pydantic tags each member of a union it tried (``metadata.a.str``, ``metadata.a.int``, ...), in words.
_UNION_MEMBERS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean"}
_PATTERN_WORDS = {f"String should match pattern '{NAME_PATTERN}'": NAME_RULE}


def readable(details: Iterable[Any]) -> list[Any]:
    """``details`` (dicts with ``key`` and ``message``; anything else is kept as it is) in words: a union's members
    merged into one line for the field, and the naming rule said instead of its pattern."""
    details = [_pattern_in_words(d) for d in details]
    tried: dict[str, list[str]] = {}
    for detail in details:
        field, _, member = _key_of(detail).rpartition(".")
        if field and member in _UNION_MEMBERS:
            tried.setdefault(field, []).append(member)
    unions = {field for field, members in tried.items() if len(members) > 1}
    merged: list[Any] = []
    for detail in details:
        field = _key_of(detail).rpartition(".")[0]
        if field not in unions:
            merged.append(detail)
        elif field in tried:  # the union's first member says it for all, once
            merged.append({**detail, "key": field, "message": _union_words(field, tried.pop(field))})
    return merged


def in_words(exc: ValidationError, *, root: str = "body", limit: int = 10) -> str:
    """A pydantic error as one line, ``field: what is wrong; ...``; ``root`` names a value with no field (the body)."""
    details = readable(
        {"key": ".".join(str(part) for part in error["loc"]), "message": error["msg"]} for error in exc.errors()
    )
    return "; ".join(f"{d['key'] or root}: {d['message']}" for d in details[:limit])


def _pattern_in_words(detail: Any) -> Any:
    if isinstance(detail, Mapping) and (words := _PATTERN_WORDS.get(str(detail.get("message")))) is not None:
        return {**detail, "message": words}
    return detail


def _key_of(detail: Any) -> str:
    return str(detail.get("key") or "") if isinstance(detail, Mapping) else ""


def _union_words(field: str, members: list[str]) -> str:
    if "metadata" in field.split(".")[:-1]:
        return "a metadata value must be a string, a number, a boolean or null (not an object or a list)"
    words = [_UNION_MEMBERS[m] for m in members if not (m == "int" and "float" in members)]
    return "should be " + (", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0])
