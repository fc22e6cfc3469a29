"""One memory's page: its text as markdown, everything known about it, its whole history with the differences between
versions, and the edit form (content, tags, metadata, scope and visibility, widening only). Edits go through the memory
service, so the page follows the API's rules and records its history the same way."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from litestar import Request, Response, get, post
from pydantic import ValidationError

from app.accounts.models import User
from app.container import Container
from app.errors import AppError, ValidationFailed
from app.memories.schemas import MAX_HISTORY_PAGE, HistoryEntry, MemoryOut, MemoryPatch
from app.memories.scopes import reachable_scopes
from app.text import check_metadata
from app.web.flash import Flash, redirect_with
from app.web.memories import BROWSER, safe_back
from app.web.memory_view import DiffLine, body_of, diff, markdown
from app.web.pages import form_data, render, web_principal
from app.web.session import verify_csrf

# A memory's history is read a page at a time; beyond this many events the page shows the newest and says so.
MAX_EVENTS = 5 * MAX_HISTORY_PAGE


@dataclass(frozen=True, slots=True)
class Version:
    entry: HistoryEntry
    changes: list[DiffLine]


def page_url(memory_id: str) -> str:
    return f"{BROWSER}/{quote(memory_id, safe='')}"


async def _history(container: Container, user: User, memory_id: str) -> tuple[list[Version], bool]:
    """Every event, oldest first, each UPDATE with its line differences; and whether older ones were left out."""
    entries: list[HistoryEntry] = []
    after: int | None = None
    while True:
        page = await container.memories.history(
            web_principal(user), None, memory_id, limit=MAX_HISTORY_PAGE, after=after
        )
        entries.extend(page.history)
        if page.next is None:
            break
        after = page.next
        if len(entries) >= MAX_EVENTS:
            entries = entries[-MAX_EVENTS:]
    cut = len(entries) >= MAX_EVENTS and after is not None
    versions = [Version(e, diff(e.old_content, e.new_content) if e.event == "UPDATE" else []) for e in entries]
    return versions, cut


def _tags(text: str) -> list[str]:
    return [tag.strip() for tag in text.replace("\n", ",").split(",") if tag.strip()]


def _metadata_text(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, indent=2, ensure_ascii=False, sort_keys=True)


def _metadata(text: str) -> dict[str, Any]:
    """The metadata the form's JSON text gives (empty text is none); ValidationFailed says what is wrong with it."""
    if not text.strip():
        return {}
    try:
        metadata = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationFailed(
            f"metadata is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", field="metadata"
        ) from None
    if not isinstance(metadata, dict):
        raise ValidationFailed('metadata must be a JSON object, such as {"ticket": "T-1"}', field="metadata")
    return check_metadata(metadata)


async def _render(
    request: Request[Any, Any, Any],
    container: Container,
    user: User,
    memory: MemoryOut,
    *,
    status_code: int = 200,
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    back: str = BROWSER,
) -> Response[Any]:
    versions, cut = await _history(container, user, memory.id)
    body = body_of(memory.content, memory.source)
    return render(
        request,
        "memory.html",
        status_code=status_code,
        user=user,
        memory=memory,
        body_html=markdown(body),
        versions=list(reversed(versions)),
        history_cut=cut,
        scopes=reachable_scopes(memory.scope),
        errors=errors or {},
        values=values
        or {
            "content": memory.content,
            "tags": ", ".join(memory.tags),
            "metadata": _metadata_text(memory.metadata),
            "scope": memory.scope,
            "visibility": "",
        },
        back=back,
        here=page_url(memory.id),
    )


@get(BROWSER + "/{memory_id:str}", name="web:memory")
async def memory_page(
    request: Request[Any, Any, Any], memory_id: str, user: User, container: Container
) -> Response[Any]:
    memory = await container.memories.get(web_principal(user), None, memory_id)
    return await _render(request, container, user, memory, back=safe_back(request.query_params.get("back")))


@post(BROWSER + "/{memory_id:str}/edit", status_code=303)
async def edit(request: Request[Any, Any, Any], memory_id: str, user: User, container: Container) -> Response[Any]:
    """Save what the form changed; fields left as they were are not sent, so an unchanged scope is no promotion."""
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    principal = web_principal(user)
    memory = await container.memories.get(principal, None, memory_id)
    back = safe_back(data.get("back"))
    content = data.get("content", "").replace("\r\n", "\n")
    tags = _tags(data.get("tags", ""))
    values = {k: data.get(k, "") for k in ("content", "tags", "metadata", "scope", "visibility")}
    # A post without the metadata field (an older form) leaves the metadata as it is.
    if "metadata" not in data:
        values["metadata"] = _metadata_text(memory.metadata)
    patch: dict[str, Any] = {}
    if content != memory.content:
        patch["content"] = content
    if tags != memory.tags:
        patch["tags"] = tags
    try:
        metadata = _metadata(values["metadata"])
    except AppError as exc:
        refused = {"metadata": exc.message}
        return await _render(
            request, container, user, memory, status_code=422, errors=refused, values=values, back=back
        )
    if metadata != memory.metadata:
        patch["metadata"] = metadata
    if data.get("scope") and data["scope"] != memory.scope:
        patch["scope"] = data["scope"]
    if data.get("visibility") == "public" and memory.visibility == "private":
        patch["visibility"] = "public"
    if not patch:
        return redirect_with(request, page_url(memory_id), Flash(notice="Nothing changed."))
    try:
        await container.memories.update(principal, None, memory_id, MemoryPatch.model_validate(patch))
    except ValidationError as exc:
        errors: dict[str, str] = {}
        for error in exc.errors():
            field = str(error["loc"][0]) if error.get("loc") else "form"
            errors.setdefault(field if field in values else "form", f"{field}: {error['msg']}")
        return await _render(request, container, user, memory, status_code=422, errors=errors, values=values, back=back)
    except AppError as exc:
        field = str(exc.extra.get("field") or "form")
        return await _render(
            request,
            container,
            user,
            memory,
            status_code=exc.status_code if 400 <= exc.status_code < 500 else 422,
            errors={field if field in values else "form": exc.message},
            values=values,
            back=back,
        )
    changed = ", ".join(patch)
    return redirect_with(request, page_url(memory_id), Flash(notice=f"Memory saved ({changed} changed)."))
