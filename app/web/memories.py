"""The memory browser: search, filter by session, agent, scope and tag, page through, delete."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response, get, post
from pydantic import ValidationError

from app.accounts.models import User
from app.container import Container
from app.errors import AppError
from app.identity import validate_name
from app.memories.schemas import SearchIn
from app.memories.scopes import SCOPES
from app.web.flash import Flash, redirect_with
from app.web.pages import form_data, render, web_principal
from app.web.session import verify_csrf

PAGE_SIZE = 20
# A memory longer than this is folded to a preview with "show all" (memories can hold 16,000 characters).
FOLD_CHARS = 600
FOLD_LINES = 8
PREVIEW_CHARS = 400
PREVIEW_LINES = 6
FILTERS = ("q", "session", "agent", "scope", "tag")
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
    return values, errors


def preview(content: str) -> str:
    """The start of a long memory: its first lines, cut at a space when there is one near the end."""
    head = "\n".join(content.split("\n")[:PREVIEW_LINES])[:PREVIEW_CHARS].rstrip()
    space = head.rfind(" ")
    return head[:space] if len(head) == PREVIEW_CHARS and space > PREVIEW_CHARS - 60 else head


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
    if not errors:
        session, agent = values["session"] or None, values["agent"] or None
        tags = [values["tag"]] if values["tag"] else []
        try:
            if values["q"]:
                search = SearchIn(query=values["q"], limit=PAGE_SIZE, session=session, agent=agent, tags=tags or None)
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
                    limit=PAGE_SIZE,
                    cursor=cursor,
                    owner_view=True,
                )
                memories = list(page.memories)
                if page.next_cursor:
                    next_url = f"{BROWSER}?{urlencode({**values, 'cursor': page.next_cursor})}"
        except ValidationError as exc:
            errors["q"] = "; ".join(str(e.get("msg")) for e in exc.errors())
        except AppError as exc:
            errors[str(exc.extra.get("field") or "form")] = exc.message
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
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
        first_url=f"{BROWSER}?{urlencode(values)}" if cursor else None,
        back=safe_back(here),
        searching=bool(values["q"]),
        fold_chars=FOLD_CHARS,
        fold_lines=FOLD_LINES,
        preview=preview,
    )


@post(BROWSER + "/{memory_id:str}/delete", status_code=303)
async def delete(request: Request[Any, Any, Any], memory_id: str, user: User, container: Container) -> Response[Any]:
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    await container.memories.delete(web_principal(user), None, [memory_id])
    return redirect_with(request, safe_back(data.get("back")), Flash(notice="Memory deleted. Its history is kept."))
