"""The one filter grammar both stores accept, and its rendering for qdrant-edge and for qdrant-client."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import qdrant_edge as qe

from app.memories.vector_stores.base import TENANT_FIELD

if TYPE_CHECKING:
    from qdrant_client import models

Scalar = str | int | float | bool


# The payload fields a read may narrow to named entities (app.memories.points).
ENTITY_FIELDS = ("end_user", "session", "agent")


class FilterError(ValueError):
    """The caller's filter dict cannot be expressed."""


@dataclass(frozen=True, slots=True)
class Condition:
    """``key`` (a dotted payload path) equals one of ``values``; all conditions of a filter must hold."""

    key: str
    op: Literal["eq", "in"]
    values: tuple[Scalar, ...]


def _scalar(key: str, value: Any) -> Scalar:
    if isinstance(value, str | bool | int | float):
        return value
    raise FilterError(f"filter value for {key!r} must be a string, number or boolean")


def parse_filters(filters: Mapping[str, Any] | None) -> list[Condition]:
    """The one filter grammar both stores accept.

    ``{"k": v}`` is equality, ``{"k": {"eq": v}}`` too, ``{"k": {"in": [...]}}`` is membership, ``{"AND": [f, ...]}``
    requires every sub-filter. A dotted key is a nested payload path. On an array field (``tags``) equality means
    "contains", so ``AND`` of equalities on ``tags`` means "has all of these tags". Anything else is rejected rather
    than guessed at.
    """
    conditions: list[Condition] = []
    for key, value in (filters or {}).items():
        if key == "AND":
            if not isinstance(value, list) or not all(isinstance(sub, Mapping) for sub in value):
                raise FilterError("AND takes a list of filter objects")
            for sub in value:
                conditions.extend(parse_filters(sub))
            continue
        if not isinstance(key, str) or not key or key.startswith("$") or key in ("OR", "NOT"):
            raise FilterError(f"unsupported filter key {key!r}")
        if any(not part for part in key.split(".")):
            raise FilterError(f"invalid filter path {key!r}")
        if isinstance(value, Mapping):
            if len(value) != 1:
                raise FilterError(f"filter on {key!r} takes exactly one operator")
            ((op, operand),) = value.items()
            if op == "eq":
                conditions.append(Condition(key, "eq", (_scalar(key, operand),)))
            elif op == "in":
                if not isinstance(operand, list) or not operand:
                    raise FilterError(f"'in' on {key!r} takes a non-empty list")
                conditions.append(Condition(key, "in", tuple(_scalar(key, v) for v in operand)))
            else:
                raise FilterError(f"unsupported filter operator {op!r} on {key!r}")
        else:
            conditions.append(Condition(key, "eq", (_scalar(key, value),)))
    return conditions


# What decides whether a reader may read a point at all (``read_filter``); the rest of a filter only narrows a search.
_ACCESS_FIELDS = (TENANT_FIELD, "visibility")


def tenants(conditions: Sequence[Condition]) -> list[str]:
    """The tenants a filter names: a search's lexical query is in their token ids (``lexical.query_vector``)."""
    return [str(v) for c in conditions if c.key == TENANT_FIELD for v in c.values]


def idf_corpus(conditions: Sequence[Condition]) -> list[Condition]:
    """The points a search measures how rare its words are over (BM25's IDF): those the reader may read, the
    tenant's and within it the visibility keys it holds. Another tenant's memories, or another session's or agent's
    it may not read, would otherwise move its scores, and its scores would tell how often they use a word. What only
    narrows a search (scope, tags, metadata) stays out, or a tag naming three memories would weigh words among three.
    A filter naming no tenant measures over the whole collection."""
    return [c for c in conditions if c.key in _ACCESS_FIELDS]


def _homogeneous(values: tuple[Scalar, ...], kind: type) -> bool:
    return all(isinstance(v, kind) and not isinstance(v, bool) for v in values)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _edge_path(key: str) -> str:
    """A payload path qdrant-edge parses: a metadata key of other characters (a space, an accent, an emoji) is quoted,
    or the path is refused ("invalid JSON path"). Keys never hold '"' or '\\' (app.text.metadata_problem)."""
    head, dot, name = key.partition(".")
    if dot and not _BARE_KEY.fullmatch(name):
        return f'{head}."{name}"'
    return key


def to_edge_filter(conditions: Sequence[Condition]) -> qe.Filter | None:
    """Render for qdrant-edge."""

    def one(key: str, value: Scalar) -> qe.FieldCondition:
        key = _edge_path(key)
        if isinstance(value, float):  # MatchValue takes str, int and bool only
            return qe.FieldCondition(key=key, range=qe.RangeFloat(gte=value, lte=value))
        if isinstance(value, bool):
            # qdrant-edge 0.9.0 reads a Python bool as the integer 1/0, which never matches a JSON true/false;
            # numpy's bool is not an int subclass, so it arrives as a bool.
            return qe.FieldCondition(key=key, match=qe.MatchValue(np.bool_(value)))  # type: ignore[arg-type]
        return qe.FieldCondition(key=key, match=qe.MatchValue(value))

    must: list[Any] = []
    for c in conditions:
        if c.op == "eq":
            must.append(one(c.key, c.values[0]))
        elif _homogeneous(c.values, str) or _homogeneous(c.values, int):
            must.append(qe.FieldCondition(key=_edge_path(c.key), match=qe.MatchAny(list(c.values))))  # type: ignore[arg-type]
        else:
            must.append(qe.Filter(should=[one(c.key, v) for v in c.values]))
    return qe.Filter(must=must) if must else None


def to_client_filter(conditions: Sequence[Condition]) -> models.Filter | None:
    """Render for qdrant-client, condition for condition the same as ``to_edge_filter``."""
    # Imported here: the embedded index's own process (edge_process) uses this module without qdrant-client.
    from qdrant_client import models

    def one(key: str, value: Scalar) -> models.FieldCondition:
        if isinstance(value, float):
            return models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))

    must: list[Any] = []
    for c in conditions:
        if c.op == "eq":
            must.append(one(c.key, c.values[0]))
        elif _homogeneous(c.values, str) or _homogeneous(c.values, int):
            must.append(models.FieldCondition(key=c.key, match=models.MatchAny(any=list(c.values))))
        else:
            must.append(models.Filter(should=[one(c.key, v) for v in c.values]))
    return models.Filter(must=must) if must else None


def read_filter(
    user_id: str,
    visibilities: Sequence[str] | None,
    *,
    scope: str | None = None,
    tags: Sequence[str] | None = None,
    metadata: Mapping[str, Scalar] | None = None,
    entities: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """The filter of every tenant read: the tenant, the visibility keys it may read (None: all of the tenant's, the
    owner's own view), and optionally a scope, all ``tags``, metadata equalities and, per entity field (end_user,
    session, agent), one of the values given. Read rules change here only."""
    filters: dict[str, Any] = {"user_id": user_id}
    for key, values in (entities or {}).items():
        if key not in ENTITY_FIELDS:
            raise FilterError(f"unsupported entity filter {key!r}")
        if isinstance(values, str) or not values or not all(isinstance(v, str) and v for v in values):
            raise FilterError(f"entity filter {key!r} takes a non-empty list of names")
        filters[key] = {"in": list(dict.fromkeys(values))}
    if visibilities is not None:
        filters["visibility"] = {"in": list(visibilities)}
    if scope is not None:
        filters["scope"] = scope
    if tags is not None and (isinstance(tags, str) or not all(isinstance(t, str) and t for t in tags)):
        raise FilterError("tags must be a list of non-empty strings")
    if tags:
        filters["AND"] = [{"tags": tag} for tag in dict.fromkeys(tags)]
    for key, value in (metadata or {}).items():
        if not isinstance(key, str) or not key or "." in key:
            raise FilterError(f"invalid metadata filter key {key!r}")
        filters[f"meta.{key}"] = value
    return filters
