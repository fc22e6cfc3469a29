"""The account's own data on the dashboard: download it all (``/account/export``) and delete the account
(``/account/delete``, with the password entered again)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get, post
from litestar.response import Stream

from app.accounts.models import User
from app.container import Container
from app.identity import validate_name
from app.portability import service as portability
from app.portability.routes import JSONL, export_filename, lines_of
from app.web import service
from app.web.address_limits import limiter_of
from app.web.pages import PAGE_HEADERS, form_data, render
from app.web.ratelimit import Limit
from app.web.session import SESSION_COOKIE, verify_csrf

# Wrong passwords per account: a stolen browser session cannot guess its way to deleting the account.
PASSWORD_LIMIT = Limit(attempts=5, window_seconds=300)
WRONG_PASSWORD = "that is not your password"


@get("/account/export", name="web:account-export")
async def export_download(request: Request[Any, Any, Any], user: User, container: Container) -> Stream:
    """Download my data: every memory with its history, documents, agents, messages and tasks as engram-export."""
    session = request.query_params.get("session") or None
    if session is not None:
        validate_name(session, "session")
    lines = portability.export(container, user.id, session=session, vectors=False)
    return Stream(
        lines_of(lines),
        media_type=JSONL,
        headers={
            **PAGE_HEADERS,
            "Content-Disposition": f'attachment; filename="{export_filename(user.id, session)}"',
        },
    )


@get("/account/delete", name="web:account-delete")
async def delete_page(request: Request[Any, Any, Any], user: User, container: Container) -> Response[Any]:
    return render(request, "account_delete.html", user=user, errors={}, values={})


@post("/account/delete", status_code=200)
async def delete_account(request: Request[Any, Any, Any], user: User, container: Container) -> Response[Any]:
    """Erase the account everywhere once its password is entered again; the browser session ends with it."""
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    limiter = limiter_of(container)
    attempts = f"account-delete:{user.id}"
    wait = await limiter.retry_after(attempts, PASSWORD_LIMIT)
    if wait is not None:
        errors = {"password": f"too many attempts, try again in {wait} s"}
        return render(
            request,
            "account_delete.html",
            status_code=429,
            user=user,
            errors=errors,
            values={},
            headers={"Retry-After": str(wait)},
        )
    async with container.db.session() as session:
        confirmed = await service.authenticate(session, user.email, data.get("password", ""))
    if confirmed is None or confirmed.id != user.id:
        await limiter.hit(attempts, PASSWORD_LIMIT)
        return render(
            request, "account_delete.html", status_code=400, user=user, errors={"password": WRONG_PASSWORD}, values={}
        )
    await portability.delete(container, user.id)
    await limiter.reset(attempts)
    response = render(request, "account_deleted.html", user=None, email=user.email)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
