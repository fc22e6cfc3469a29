"""The memory browser: search, filter by session, agent, scope and tag, page through, counts, delete and re-tag
many at once."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response, get, post
from litestar.exceptions import ValidationException
from pydantic import ValidationError

from app.accounts.models import User
from app.accounts.principal import Principal
from app.container import Container
from app.errors import AppError, ValidationFailed
from app.identity import validate_name
from app.memories.schemas import MAX_TAGS, MemoryPatch, SearchIn
from app.memories.scopes import SCOPES
from app.text import text_problem
from app.web.flash import Flash, redirect_with
from app.web.memory_view import body_of, markdown
from app.web.pages import form_data, render, web_principal
from app.web.session import verify_csrf

PAGE_SIZE = 20
PAGE_SIZES = (20, 50, 100, 200)
# The most memories one bulk action takes: a page at its largest.
MAX_BULK = 200
# Counts shown per kind (sessions, tags); the page says how many more there are.
TOP_COUNTS = 12
# A memory longer than this is folded to a preview with "show all" (memories can hold 16,000 characters).
FOLD_CHARS = 600
FOLD_LINES = 8
PREVIEW_CHARS = 400
PREVIEW_LINES = 6
FILTERS = ("q", "session", "agent", "scope", "tag", "per")
BROWSER = "/dashboard/memories"


def _filters(request: Request[Any, Any, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The filter values as given, and the error of each one that is wrong."""
    values = {name: request.query_params.get(name, "").strip()[:8000] for name in FILTERS}
    errors: dict[str, str] = {}
    for name in ("session", "agent"):
        if values[name]:
            try:
                validate_name(values[name], name)
            except AppError as exc:
                errors[name] = exc.message
    if values["scope"] and values["scope"] not in SCOPES:
        errors["scope"] = f"scope must be one of {', '.join(SCOPES)}"
    if len(values["tag"]) > 64:
        errors["tag"] = "a tag has at most 64 characters"
    if values["per"] and values["per"] not in {str(n) for n in PAGE_SIZES}:
        errors["per"] = f"per page must be one of {', '.join(str(n) for n in PAGE_SIZES)}"
    return values, errors


def preview(content: str) -> str:
    """The start of a long memory: its first lines, cut at a space when there is one near the end."""
    head = "\n".join(content.split("\n")[:PREVIEW_LINES])[:PREVIEW_CHARS].rstrip()
    space = head.rfind(" ")
    return head[:space] if len(head) == PREVIEW_CHARS and space > PREVIEW_CHARS - 60 else head


def shown_filters(values: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in values.items() if v}


def safe_back(value: str | None) -> str:
    if value and value.startswith(BROWSER) and "\\" not in value and all(" " < ch < "\x7f" for ch in value):
        return value
    return BROWSER


@get(BROWSER, name="web:memories")
async def browse(request: Request[Any, Any, Any], user: User, container: Container) -> Response[Any]:
    values, errors = _filters(request)
    cursor = request.query_params.get("cursor") or None
    principal = web_principal(user)
    memories: list[Any] = []
    next_url = None
    per = int(values["per"]) if values["per"] and not errors.get("per") else PAGE_SIZE
    counts = await container.memories.counts(principal)
    if not errors:
        session, agent = values["session"] or None, values["agent"] or None
        tags = [values["tag"]] if values["tag"] else []
        try:
            if values["q"]:
                search = SearchIn(
                    query=values["q"], limit=min(per, 100), session=session, agent=agent, tags=tags or None
                )
                scope = values["scope"] or None
                found = await container.memories.search(principal, None, search, owner_view=True, scope=scope)  # type: ignore[arg-type]
                memories = list(found)
            else:
                page = await container.memories.list(
                    principal,
                    None,
                    session=session,
                    agent=agent,
                    scope=values["scope"] or None,  # type: ignore[arg-type]
                    tags=tags,
                    limit=per,
                    cursor=cursor,
                    owner_view=True,
                )
                memories = list(page.memories)
                if page.next_cursor:
                    next_url = f"{BROWSER}?{urlencode({**shown_filters(values), 'cursor': page.next_cursor})}"
        except ValidationError as exc:
            errors["q"] = "; ".join(str(e.get("msg")) for e in exc.errors())
        except AppError as exc:
            errors[str(exc.extra.get("field") or "form")] = exc.message
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    shown = shown_filters(values)
    return render(
        request,
        "memories.html",
        status_code=400 if errors else 200,
        user=user,
        memories=memories,
        values=values,
        errors=errors,
        scopes=SCOPES,
        next_url=next_url,
        first_url=f"{BROWSER}?{urlencode(shown)}" if cursor else None,
        back=safe_back(here),
        searching=bool(values["q"]),
        fold_chars=FOLD_CHARS,
        fold_lines=FOLD_LINES,
        preview=preview,
        markdown=markdown,
        body_of=body_of,
        counts=counts,
        top=TOP_COUNTS,
        page_sizes=PAGE_SIZES,
        filter_url=lambda **change: f"{BROWSER}?{urlencode({**shown, **change})}",
        max_bulk=MAX_BULK,
    )


@post(BROWSER + "/{memory_id:str}/delete", status_code=303)
async def delete(request: Request[Any, Any, Any], memory_id: str, user: User, container: Container) -> Response[Any]:
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    await container.memories.delete(web_principal(user), None, [memory_id])
    return redirect_with(request, safe_back(data.get("back")), Flash(notice="Memory deleted. Its history is kept."))


async def _selected(request: Request[Any, Any, Any]) -> tuple[dict[str, str], list[str]]:
    """The bulk form: its single fields and the ids of the ticked memories (repeated ``ids`` fields)."""
    data = await form_data(request)
    try:
        form = await request.form()
        ids = [v for v in form.getall("ids") if isinstance(v, str) and v]
    except (ValidationException, UnicodeDecodeError, ValueError, KeyError):
        ids = []
    return data, list(dict.fromkeys(ids))


async def _retagged(
    container: Container, principal: Principal, ids: list[str], action: str, tag: str
) -> dict[str, MemoryPatch]:
    """The new tag list of each ticked memory that changes, every one checked before anything is written."""
    patches: dict[str, MemoryPatch] = {}
    for memory_id in ids:
        memory = await container.memories.get(principal, None, memory_id)
        if action == "tag":
            tags = memory.tags if tag in memory.tags else [*memory.tags, tag]
        else:
            tags = [t for t in memory.tags if t != tag]
        if tags == memory.tags:
            continue
        if len(tags) > MAX_TAGS:
            raise ValidationFailed(
                f"memory {memory_id} already has {len(memory.tags)} tags, the most a memory can have", field="tag"
            )
        try:
            patches[memory_id] = MemoryPatch(tags=tags)
        except ValidationError as exc:
            problems = "; ".join(str(e.get("msg")) for e in exc.errors())
            raise ValidationFailed(f"memory {memory_id}: {problems}", field="tag") from None
    return patches


@post(BROWSER + "/bulk", status_code=303)
async def bulk(request: Request[Any, Any, Any], user: User, container: Container) -> Response[Any]:
    """Delete, tag or untag the ticked memories, all or none."""
    data, ids = await _selected(request)
    await verify_csrf(request, data.get("_csrf"))
    back = safe_back(data.get("back"))
    action = data.get("action", "")
    if not ids:
        return redirect_with(request, back, Flash(notice="Nothing was selected: tick the memories first."))
    if len(ids) > MAX_BULK:
        raise ValidationFailed(f"at most {MAX_BULK} memories at once; {len(ids)} were selected", field="ids")
    principal = web_principal(user)
    if action == "delete":
        deleted = await container.memories.delete(principal, None, ids)
        notice = f"{len(deleted)} {'memory' if len(deleted) == 1 else 'memories'} deleted. Their history is kept."
        return redirect_with(request, back, Flash(notice=notice))
    if action not in ("tag", "untag"):
        raise ValidationFailed("action must be delete, tag or untag", field="action")
    tag = data.get("tag", "").strip()
    if not tag or len(tag) > 64:
        raise ValidationFailed("name the tag to add or remove (1-64 characters)", field="tag")
    if problem := text_problem(tag):
        raise ValidationFailed(f"the tag {problem}", field="tag")
    verb = "tagged" if action == "tag" else "untagged"
    try:
        patches = await _retagged(container, principal, ids, action, tag)
        if patches:
            await container.memories.update_many(principal, None, patches)
    except AppError as exc:
        exc.message = f"{exc.message}; nothing was {verb}"
        raise
    changed = len(patches)
    notice = f"{changed} of {len(ids)} selected {verb} #{tag}" + (
        "." if changed == len(ids) else " (the rest were already)."
    )
    return redirect_with(request, back, Flash(notice=notice))
