"""Mem0's filter language, read once: a plain dict or an AND / OR / NOT tree over entity ids, metadata, categories
and created_at / updated_at ranges, with ``*`` for "any value". Pure.

A filter becomes a predicate over a memory in Mem0's shape (``Mem0Memory``) that every route applies, and a
conjunctive part the index can apply itself (``pushdown``): the entity ids every match must carry. The predicate is
the rule; the pushdown only makes a search fetch less, so a filter the index cannot express still returns what it
names, never more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.errors import ValidationFailed

# Mem0's entity ids and the Engram field each is kept in (see the README's "Coming from Mem0").
ENTITY_FIELDS = {"user_id": "end_user", "agent_id": "agent", "run_id": "session"}
ENTITY_IDS = ("user_id", "agent_id", "app_id", "run_id")
WILDCARD = "*"
_TIME_FIELDS = ("created_at", "updated_at")
_COMPARISONS = ("gt", "gte", "lt", "lte")
_OPERATORS = ("eq", "ne", "in", "nin", "contains", "icontains", *_COMPARISONS)

Memory = Mapping[str, Any]
Predicate = Callable[[Memory], bool]


@dataclass(frozen=True, slots=True)
class Filter:
    """A parsed filter: the rule every result must satisfy, and what the index can narrow to first."""

    matches: Predicate
    # Engram field (end_user, agent, session) -> the names every match carries one of.
    pushdown: dict[str, list[str]] = field(default_factory=dict)
    # Whether ``pushdown`` says all the filter says (a search then needs to fetch no more than it returns).
    exact: bool = True

    @property
    def names_entity(self) -> bool:
        return bool(self.pushdown)


def _fail(message: str) -> ValidationFailed:
    return ValidationFailed(f"filters: {message}", field="filters")


def parse(filters: Any) -> Filter:
    """Parse a Mem0 ``filters`` value (None or {} is every memory the key may read)."""
    if filters is None:
        return Filter(lambda _: True)
    if not isinstance(filters, Mapping):
        raise _fail("must be an object")
    predicate = _node(filters)
    pushdown, exact = _pushdown(filters)
    return Filter(predicate, pushdown, exact)


def _node(node: Mapping[str, Any]) -> Predicate:
    parts: list[Predicate] = []
    for key, value in node.items():
        if key in ("AND", "OR", "NOT"):
            subs = [value] if key == "NOT" and isinstance(value, Mapping) else value
            if not isinstance(subs, list) or not subs or not all(isinstance(s, Mapping) for s in subs):
                raise _fail(f"{key} takes a non-empty list of filter objects")
            parts.append(_combine(key, [_node(s) for s in subs]))
        elif key == "metadata":
            parts.append(_metadata(value))
        elif key in ENTITY_IDS or key in _TIME_FIELDS or key in ("categories", "memory", "id"):
            parts.append(_field(key, value))
        else:
            raise _fail(
                f"unsupported filter field {key!r}; use user_id, agent_id, app_id, run_id, metadata, categories, "
                "created_at, updated_at, memory or id, combined with AND, OR and NOT"
            )
    return lambda m: all(p(m) for p in parts)


def _combine(op: str, children: list[Predicate]) -> Predicate:
    def check(m: Memory) -> bool:
        if op == "AND":
            return all(c(m) for c in children)
        if op == "OR":
            return any(c(m) for c in children)
        return not any(c(m) for c in children)  # NOT: none of them holds

    return check


def _metadata(value: Any) -> Predicate:
    if not isinstance(value, Mapping) or not value:
        raise _fail("metadata takes an object of key: value (or key: {operator: value})")
    checks = [(key, _condition(f"metadata.{key}", condition)) for key, condition in value.items()]

    def check(m: Memory) -> bool:
        meta = m.get("metadata") or {}
        return all(test(meta.get(key)) for key, test in checks)

    return check


def _field(key: str, value: Any) -> Predicate:
    test = _condition(key, value)
    if key == "categories":
        # A memory's categories are a list: equality and "contains" mean one of them; "in" means any overlap.
        return lambda m: _categories(test, m.get("categories") or [], value)
    return lambda m: test(m.get(key))


def _categories(test: Callable[[Any], bool], categories: Sequence[str], value: Any) -> bool:
    if isinstance(value, Mapping) and set(value) & {"ne", "nin"}:
        return all(test(c) for c in categories)
    if value == WILDCARD:
        return bool(categories)
    return any(test(c) for c in categories)


def _condition(key: str, value: Any) -> Callable[[Any], bool]:
    """The test one field's value must pass: a scalar (equality), ``*`` (present) or {operator: operand, ...}."""
    if value == WILDCARD:
        return lambda v: v is not None and v != []
    if not isinstance(value, Mapping):
        _scalar(key, value)
        return lambda v: v == value if key not in _TIME_FIELDS else _same_time(v, value, key)
    if not value:
        raise _fail(f"{key} takes an operator, e.g. {{'in': [...]}}")
    tests: list[Callable[[Any], bool]] = []
    for op, operand in value.items():
        if op not in _OPERATORS:
            raise _fail(f"unsupported operator {op!r} on {key!r}; use one of {', '.join(_OPERATORS)}")
        tests.append(_operator(key, op, operand))
    return lambda v: all(t(v) for t in tests)


def _operator(key: str, op: str, operand: Any) -> Callable[[Any], bool]:
    if op in _COMPARISONS:
        if key in _TIME_FIELDS or (key.startswith("metadata.") and isinstance(operand, str)):
            bound = _time(operand, key) if key in _TIME_FIELDS else operand
            convert: Callable[[Any], Any] = (lambda v: _time(v, key)) if key in _TIME_FIELDS else (lambda v: v)
        else:
            if isinstance(operand, bool) or not isinstance(operand, int | float):
                raise _fail(f"{op} on {key!r} takes a number or, on created_at and updated_at, a date")
            bound, convert = operand, lambda v: v
        compare = {
            "gt": lambda a, b: a > b,
            "gte": lambda a, b: a >= b,
            "lt": lambda a, b: a < b,
            "lte": lambda a, b: a <= b,
        }[op]

        def ordered(v: Any) -> bool:
            if v is None or isinstance(v, bool):
                return False
            try:
                return bool(compare(convert(v), bound))
            except (TypeError, ValidationFailed):
                return False

        return ordered
    if op in ("in", "nin"):
        if not isinstance(operand, list) or not operand:
            raise _fail(f"{op} on {key!r} takes a non-empty list")
        for item in operand:
            _scalar(key, item)
        members = list(operand)
        return (lambda v: v in members) if op == "in" else (lambda v: v not in members)
    if op in ("contains", "icontains"):
        if not isinstance(operand, str):
            raise _fail(f"{op} on {key!r} takes a string")
        if op == "icontains":
            return lambda v: isinstance(v, str) and operand.lower() in v.lower()
        return lambda v: isinstance(v, str) and operand in v
    _scalar(key, operand)
    if key in _TIME_FIELDS:
        return (lambda v: _same_time(v, operand, key)) if op == "eq" else (lambda v: not _same_time(v, operand, key))
    return (lambda v: v == operand) if op == "eq" else (lambda v: v != operand)


def _scalar(key: str, value: Any) -> None:
    if not isinstance(value, str | int | float | bool) and value is not None:
        raise _fail(f"the value for {key!r} must be a string, number, boolean or null")


def _time(value: Any, key: str) -> datetime:
    """A date or time as Mem0 accepts it: ISO 8601 (a date alone is midnight UTC) or a Unix timestamp."""
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            when = datetime.fromtimestamp(value, UTC)
        except (ValueError, OverflowError, OSError):  # past year 9999 (or NaN): no date at all
            raise _fail(f"{key}: {value!r} is out of range for a Unix timestamp (seconds)") from None
    elif isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise _fail(f"{key} takes an ISO 8601 date or a Unix timestamp, not {value!r}") from None
    else:
        raise _fail(f"{key} takes an ISO 8601 date or a Unix timestamp")
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _same_time(value: Any, operand: Any, key: str) -> bool:
    try:
        return value is not None and _time(value, key) == _time(operand, key)
    except ValidationFailed:
        return False


def _pushdown(node: Mapping[str, Any]) -> tuple[dict[str, list[str]], bool]:
    """The entity names every match must carry (from the top-level conjunction), and whether that is all the filter
    says."""
    names: dict[str, list[str]] = {}
    exact = True

    def narrow(field_name: str, values: list[str]) -> None:
        if field_name in names:
            names[field_name] = [v for v in names[field_name] if v in values]
        else:
            names[field_name] = list(dict.fromkeys(values))

    conjuncts: list[tuple[str, Any]] = list(node.items())
    while conjuncts:
        key, value = conjuncts.pop()
        if key == "AND" and isinstance(value, list):
            for sub in value:
                conjuncts.extend(sub.items())
            continue
        if key == "OR" and isinstance(value, list):
            same = _same_entity_equalities(value)
            if same is not None:
                narrow(*same)
                continue
        target = ENTITY_FIELDS.get(key)
        if target is not None and isinstance(value, str) and value != WILDCARD:
            narrow(target, [value])
        elif target is not None and isinstance(value, Mapping) and set(value) == {"in"}:
            operand = value["in"]
            if isinstance(operand, list) and operand and all(isinstance(v, str) for v in operand):
                narrow(target, operand)
            else:
                exact = False
        elif (
            target is not None and isinstance(value, Mapping) and set(value) == {"eq"} and isinstance(value["eq"], str)
        ):
            narrow(target, [value["eq"]])
        else:
            exact = False
    return names, exact


def _same_entity_equalities(branches: list[Any]) -> tuple[str, list[str]] | None:
    """``OR`` of plain equalities on one entity id (``[{"user_id": "a"}, {"user_id": "b"}]``) as (field, names)."""
    field_name: str | None = None
    values: list[str] = []
    for branch in branches:
        if not isinstance(branch, Mapping) or len(branch) != 1:
            return None
        ((key, value),) = branch.items()
        target = ENTITY_FIELDS.get(key)
        if target is None or not isinstance(value, str) or value == WILDCARD or field_name not in (None, target):
            return None
        field_name = target
        values.append(value)
    return (field_name, values) if field_name is not None else None
