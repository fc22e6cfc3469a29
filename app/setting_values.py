"""How one setting's value is taken: coerced to its field's type from what the environment or ``engram.toml`` gave
(text, or TOML's own types), then checked against the field's bounds.

Small on purpose: ``engram`` reads its settings on every command, and pydantic's import alone cost each one about
70 ms of CPU. The messages keep pydantic's wording ("Input should be a valid integer, ..."), which users have seen.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})

Number = TypeVar("Number", int, float)


@dataclass(frozen=True)
class Bounds:
    """The range a number must lie in; None: no bound on that side."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None

    def problem(self, value: float) -> str | None:
        """Why ``value`` lies outside, in pydantic's words; None when it is inside."""
        if self.gt is not None and not value > self.gt:
            return f"Input should be greater than {self.gt}"
        if self.ge is not None and not value >= self.ge:
            return f"Input should be greater than or equal to {self.ge}"
        if self.lt is not None and not value < self.lt:
            return f"Input should be less than {self.lt}"
        if self.le is not None and not value <= self.le:
            return f"Input should be less than or equal to {self.le}"
        return None


def bounded(
    default: Number,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
) -> Number:
    """A numeric field's default, with the range every value of it (the default included) must lie in."""
    bounds = Bounds(gt=gt, ge=ge, lt=lt, le=le)
    return dataclasses.field(default=default, metadata={"bounds": bounds})


def bounds_of(field: dataclasses.Field[Any]) -> Bounds | None:
    found = field.metadata.get("bounds")
    return found if isinstance(found, Bounds) else None


def checked(value: object, annotation: Any, bounds: Bounds | None) -> Any:
    """``value`` coerced to ``annotation`` and inside ``bounds``, or ValueError saying why not."""
    result = coerce(value, annotation)
    if bounds is not None and isinstance(result, int | float):
        problem = bounds.problem(result)
        if problem is not None:
            raise ValueError(problem)
    return result


def structured(annotation: Any) -> bool:
    """Whether a field's value is a structure (dict, list, ...), given in the environment as JSON."""
    if _is_union(annotation):
        return any(structured(arm) for arm in typing.get_args(annotation) if arm is not type(None))
    origin = typing.get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, Mapping | list | set | tuple | frozenset)


def coerce(value: object, annotation: Any) -> Any:
    """``value`` as the type ``annotation`` names, or ValueError saying why it cannot be.

    Text converts to numbers, booleans and paths as it would from the environment; TOML's own types pass when they fit.
    Types: str, int, float, bool, Path, Literal[...], dict[K, V], list[T], and unions of these with None."""
    if _is_union(annotation):
        arms = typing.get_args(annotation)
        if value is None and type(None) in arms:
            return None
        problems = []
        for arm in (arm for arm in arms if arm is not type(None)):
            try:
                return coerce(value, arm)
            except ValueError as exc:
                problems.append(str(exc))
        raise ValueError("; ".join(problems))
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return _literal(value, typing.get_args(annotation))
    if origin is dict:
        key_type, value_type = typing.get_args(annotation)
        return _dict(value, key_type, value_type)
    if origin is list:
        (item_type,) = typing.get_args(annotation)
        if not isinstance(value, list | tuple):
            raise ValueError("Input should be a valid list")
        return [_at(index, item, item_type) for index, item in enumerate(value)]
    convert = _SCALARS.get(annotation)
    if convert is None:
        raise TypeError(f"settings cannot hold a {annotation!r}")  # a field declared with a type coerce() lacks
    return convert(value)


def _is_union(annotation: Any) -> bool:
    return isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union


def _at(where: object, value: object, annotation: Any) -> Any:
    """An item of a structure, coerced; a problem names the item's place."""
    try:
        return coerce(value, annotation)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _dict(value: object, key_type: Any, value_type: Any) -> dict[Any, Any]:
    if not isinstance(value, Mapping):
        raise ValueError("Input should be a valid dictionary")
    return {_at(key, key, key_type): _at(key, item, value_type) for key, item in value.items()}


def _literal(value: object, choices: tuple[Any, ...]) -> Any:
    for choice in choices:
        if value == choice or (isinstance(value, str) and not isinstance(choice, str) and value == str(choice)):
            return choice
    raise ValueError("Input should be " + " or ".join(repr(choice) for choice in choices))


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("Input should be a valid string")
    return value


def _int(value: object) -> int:
    # As pydantic's lax mode took them: a bool as 0 or 1, a whole float, the text of an integer (also "8000.0").
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("Input should be a finite number")
        if not value.is_integer():
            raise ValueError("Input should be a valid integer, got a number with a fractional part")
        return int(value)
    if isinstance(value, str):
        whole, point, zeros = value.strip().partition(".")
        if value.isascii() and (not point or (zeros and not zeros.strip("0"))):
            try:
                return int(whole if point else value)
            except ValueError:
                pass
        raise ValueError("Input should be a valid integer, unable to parse string as an integer")
    raise ValueError("Input should be a valid integer")


def _float(value: object) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value.isascii():
        try:
            return float(value)
        except ValueError:
            pass
    if isinstance(value, str):
        raise ValueError("Input should be a valid number, unable to parse string as a number")
    raise ValueError("Input should be a valid number")


def _bool(value: object) -> bool:
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    raise ValueError("Input should be a valid boolean, unable to interpret input")


def _path(value: object) -> Path:
    if isinstance(value, str | os.PathLike):
        return Path(value)
    raise ValueError("Input is not a valid path")


_SCALARS: dict[Any, Callable[[object], Any]] = {str: _str, int: _int, float: _float, bool: _bool, Path: _path}
