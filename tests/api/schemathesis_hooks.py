"""Schemathesis hooks for the rules between fields that an OpenAPI document cannot state, each documented in words on
its operation: a generated request that breaks one is mended, so that "valid by the schema" means valid.

Only these rules are mended; every other rule is in the schema, where the positive and negative checks hold us to it.
"""

from __future__ import annotations

import re
import time
from typing import Any

import schemathesis

from app.projects.files import Refused, clean_path
from app.sync.hlc import WIRE_PATTERN

# One query parameter depending on another: OpenAPI has no way to say it (a JSON body does: see AGENT_NEEDS_SESSION).
_QUERY_DEPENDS = {"agent": "session"}
MAX_TASK_ID = 64


def _query_names(case: Any) -> set[str]:
    return {parameter.name for parameter in case.operation.query}


def _mend_query(case: Any) -> None:
    names = _query_names(case)
    query = case.query
    if not isinstance(query, dict):
        return
    for needs, needed in _QUERY_DEPENDS.items():
        if needed in names and query.get(needs) is not None and query.get(needed) is None:
            query[needed] = "s"  # agent needs a session


def _forget_cursors(case: Any) -> None:
    """A cursor is opaque: only one the API returned is valid (its form is in the schema, but not whether the feed has
    reached it), and a generator cannot make one up."""
    if isinstance(case.query, dict):
        case.query.pop("cursor", None)
        case.query.pop("since", None)


def _mend_message(case: Any) -> None:
    """A message to its own sender is refused (``to`` against the ``agent`` parameter)."""
    body, query = case.body, case.query
    if isinstance(body, dict) and isinstance(query, dict) and body.get("to") == query.get("agent"):
        body["to"] = "*"


def _mend_tasks(case: Any) -> None:
    """A batch of tasks is a graph: unique ids, no task depending on itself, no cycle (deps only point back)."""
    body = case.body
    tasks = body.get("tasks") if isinstance(body, dict) else None
    if not isinstance(tasks, list):
        return
    seen: list[str] = []
    for index, task in enumerate(tasks):
        if not isinstance(task, dict) or not isinstance(task.get("id"), str):
            continue
        if task["id"] in seen:
            suffix = f".{index}"
            task["id"] = task["id"][: MAX_TASK_ID - len(suffix)] + suffix
        deps = task.get("deps")
        if isinstance(deps, list):
            later = {t.get("id") for t in tasks[index:] if isinstance(t, dict)}
            task["deps"] = [d for d in deps if not isinstance(d, str) or d in seen or d not in later]
        seen.append(task["id"])


def _mend_documents(case: Any) -> None:
    """A batch names each file once, however it spells the path ('a' and './a' are one file)."""
    body = case.body
    documents = body.get("documents") if isinstance(body, dict) else None
    if not isinstance(documents, list):
        return
    seen: set[str] = set()
    kept = []
    for document in documents:
        try:
            path = clean_path(document.get("path")) if isinstance(document, dict) else None
        except Refused:
            path = None
        if path is None or path not in seen:
            kept.append(document)
        if path is not None:
            seen.add(path)
    body["documents"] = kept


def _mend_versions(case: Any) -> None:
    """A pushed version may not be ahead of the edge's clock (by more than the skew it allows): a rule of time."""
    body = case.body
    changes = body.get("changes") if isinstance(body, dict) else None
    now_ms = time.time_ns() // 1_000_000 - 60_000
    for change in changes if isinstance(changes, list) else []:
        stamp = change.get("hlc") if isinstance(change, dict) else None
        if isinstance(stamp, str) and re.fullmatch(WIRE_PATTERN, stamp):
            ms, counter = stamp.split(".")
            change["hlc"] = f"{int(ms) % now_ms}.{counter}"


# The smallest engram-export: its header line. An import's body is a file whose lines depend on one another (the first
# is the header), which no schema states; tests/portability drives it with real exports and malformed lines.
EMPTY_EXPORT = '{"format": "engram-export", "version": 1}\n'


@schemathesis.serializer("application/x-ndjson")
def _ndjson(context: Any, value: Any) -> bytes | None:
    """JSON Lines, sent as they are (the import's body is mended to a real export, so it is always text)."""
    return value.encode() if isinstance(value, str) else None


def _mend_import(case: Any) -> None:
    case.body = EMPTY_EXPORT
    case.media_type = "application/x-ndjson"


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    _mend_query(case)
    _forget_cursors(case)
    if case.method.upper() == "POST" and case.path.endswith("/messages"):
        _mend_message(case)
    if case.method.upper() == "POST" and case.path.endswith("/tasks"):
        _mend_tasks(case)
    if case.method.upper() == "PUT" and case.path.endswith("/documents"):
        _mend_documents(case)
    if case.method.upper() == "POST" and case.path == "/sync/v1/push":
        _mend_versions(case)
    if case.method.upper() == "POST" and case.path == "/v1/import":
        _mend_import(case)
    return case
