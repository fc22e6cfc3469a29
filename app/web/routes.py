"""Landing, signup, login and logout pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litestar import Request, Response, get, post
from litestar.response import File, Redirect

from app.container import Container, container_of
from app.errors import AppError, RateLimited, ValidationFailed
from app.web import service
from app.web.address_limits import client_address, limiter_of, signup_guard
from app.web.pages import form_data, render
from app.web.ratelimit import Limit
from app.web.session import SESSION_COOKIE, SESSION_TTL, current_user, make_cookie, verify_csrf

# Per email: slows guessing one account's password. Per address: slows trying one password on many accounts.
EMAIL_LIMIT = Limit(attempts=5, window_seconds=300)
IP_LIMIT = Limit(attempts=20, window_seconds=300)
WRONG_LOGIN = "the email or the password is wrong"
FAVICON = Path(__file__).resolve().parent / "static" / "favicon.svg"


def safe_next(value: str | None) -> str:
    """Only a path on this site: never another origin (``//evil``, ``/\\evil``, ``https://``)."""
    if (
        value
        and value.startswith("/")
        and not value.startswith(("//", "/\\"))
        and all(" " < ch < "\x7f" and ch != "\\" for ch in value)
        and len(value) <= 2000
    ):
        return value
    return "/dashboard"


def _field_errors(exc: AppError) -> dict[str, str]:
    field = exc.extra.get("field")
    return {str(field) if field else "form": exc.message}


def _session_cookie(request: Request[Any, Any, Any], token: str) -> Any:
    return make_cookie(request, SESSION_COOKIE, token, max_age=int(SESSION_TTL.total_seconds()))


@get("/favicon.ico")
async def favicon() -> File:
    """Browsers ask for /favicon.ico before (or without) reading a page's icon link."""
    return File(
        FAVICON,
        media_type="image/svg+xml",
        content_disposition_type="inline",
        headers={"Cache-Control": "max-age=86400"},
    )


@get("/", name="web:home")
async def home(request: Request[Any, Any, Any]) -> Response[Any]:
    user = await current_user(request)
    return render(request, "home.html", user=user)


@get("/signup", name="web:signup")
async def signup_page(request: Request[Any, Any, Any]) -> Response[Any]:
    user = await current_user(request)
    if user is not None:
        return Redirect("/dashboard", status_code=303)
    return render(request, "signup.html")


@post("/signup", status_code=303)
async def signup(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    email = data.get("email", "").strip()[:400]
    password = data.get("password", "")
    guard = signup_guard(container.settings)
    try:
        # Every attempt counts, failed ones too: "this email is taken" must not be askable at will.
        await guard.check(request, container)
        await guard.count(request, container)
        async with container.db.session() as session:
            user = await service.signup(session, email, password)
            opened = await service.open_session(session, user.id)
    except AppError as exc:
        status = 422 if isinstance(exc, ValidationFailed) else 429 if isinstance(exc, RateLimited) else 400
        return render(
            request,
            "signup.html",
            status_code=status,
            errors=_field_errors(exc),
            values={"email": email},
            headers=exc.headers,
        )
    return Redirect("/dashboard", status_code=303, cookies=[_session_cookie(request, opened.token)])


@get("/login", name="web:login")
async def login_page(request: Request[Any, Any, Any]) -> Response[Any]:
    target = safe_next(request.query_params.get("next"))
    if await current_user(request) is not None:
        return Redirect(target, status_code=303)
    return render(request, "login.html", values={"next": target})


@post("/login", status_code=303)
async def login(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    email = data.get("email", "").strip()[:400]
    password = data.get("password", "")
    target = safe_next(data.get("next"))
    values = {"email": email, "next": target}
    limiter = limiter_of(container)
    keys = ((f"login:ip:{client_address(request)}", IP_LIMIT), (f"login:email:{email.lower()}", EMAIL_LIMIT))
    for key, limit in keys:
        wait = await limiter.retry_after(key, limit)
        if wait is not None:
            message = f"too many attempts, try again in {wait} s"
            return render(
                request,
                "login.html",
                status_code=429,
                errors={"form": message},
                values=values,
                headers={"Retry-After": str(wait)},
            )
    old_token = request.cookies.get(SESSION_COOKIE)
    async with container.db.session() as session:
        user = await service.authenticate(session, email, password)
        if user is None:
            opened = None
        else:
            if old_token:
                await service.close_session(session, old_token)
            opened = await service.open_session(session, user.id)
    if opened is None:
        for key, limit in keys:
            await limiter.hit(key, limit)
        return render(request, "login.html", status_code=400, errors={"form": WRONG_LOGIN}, values=values)
    await limiter.reset(keys[1][0])
    return Redirect(target, status_code=303, cookies=[_session_cookie(request, opened.token)])


@post("/logout", status_code=303)
async def logout(request: Request[Any, Any, Any]) -> Response[Any]:
    if await current_user(request) is None:
        return Redirect("/", status_code=303)
    data = await form_data(request)
    await verify_csrf(request, data.get("_csrf"))
    token = request.cookies.get(SESSION_COOKIE, "")
    async with container_of(request).db.session() as session:
        await service.close_session(session, token)
    response = Redirect("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
