"""``/device``: where a logged-in person types (or follows a link with) a device's user code, sees which device asks,
and approves or denies it (RFC 8628 section 3.3).

Wrong codes count against the person and against their address (RFC 8628 section 5.1): a guessed code of someone
else's waiting device would link that device to the guesser's account.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from litestar import Request, Response, get, post
from litestar.response import Redirect

from app.accounts.models import User
from app.container import Container
from app.errors import AppError, RateLimited
from app.oauth import device, scopes
from app.web.address_limits import client_address, limiter_of
from app.web.errors import error_page
from app.web.pages import form_data, render
from app.web.ratelimit import Limit, raise_if_limited
from app.web.session import current_user, login_redirect, verify_csrf

NOT_PENDING = "No device is waiting for this code: check it, or start again on the device (codes last 15 minutes)."
BAD_FORM = "A code is 8 letters, like BCDF-GHJK."


def _limit(container: Container) -> Limit:
    return Limit(container.settings.device_code_failures_per_15_minutes, 900)


def _keys(request: Request[Any, Any, Any], user: User) -> tuple[str, str]:
    return f"device_code:user:{user.id}", f"device_code:ip:{client_address(request)}"


async def _check_limits(request: Request[Any, Any, Any], container: Container, user: User) -> None:
    for key in _keys(request, user):
        await raise_if_limited(limiter_of(container), key, _limit(container), "wrong device codes")


async def _count_failure(request: Request[Any, Any, Any], container: Container, user: User) -> None:
    for key in _keys(request, user):
        await limiter_of(container).hit(key, _limit(container))


def _entry_page(
    request: Request[Any, Any, Any], user: User, status: int = 200, code: str = "", error: str | None = None
) -> Response[Any]:
    errors = {"user_code": error} if error else {}
    return render(
        request, "device.html", status_code=status, user=user, stage="enter", errors=errors, values={"user_code": code}
    )


async def _confirm_page(request: Request[Any, Any, Any], container: Container, user: User, raw: str) -> Response[Any]:
    try:
        await _check_limits(request, container, user)
    except RateLimited as exc:
        return error_page(request, exc.status_code, exc.message, exc.headers)
    code = device.normalise_user_code(raw)
    if code is None:
        return _entry_page(request, user, 400, raw[:20], BAD_FORM)
    async with container.db.session() as session:
        pending = await device.find_pending(session, code)
    if pending is None:
        await _count_failure(request, container, user)
        return _entry_page(request, user, 400, raw[:20], NOT_PENDING)
    described = [(s, scopes.DESCRIPTIONS.get(s, s)) for s in scopes.split(pending.scope)]
    return render(request, "device.html", user=user, stage="confirm", device=pending, scopes=described)


@get("/device")
async def device_page(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    """The code entry form, or with ``?user_code=`` (verification_uri_complete) the device's consent page."""
    user = await current_user(request)
    if user is None:
        return login_redirect(request)
    raw = request.query_params.get("user_code")
    if raw is None:
        return _entry_page(request, user)
    return await _confirm_page(request, container, user, raw)


@post("/device")
async def device_decision(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    """Approve or deny the device waiting for the submitted code, as the logged-in user."""
    data = await form_data(request)
    raw = data.get("user_code", "")
    user = await current_user(request)
    if user is None:
        return Redirect(f"/login?next={quote('/device?user_code=' + raw[:20], safe='')}", status_code=303)
    decision = data.get("decision")
    try:
        await verify_csrf(request, data.get("_csrf"))
        if decision not in ("approve", "deny"):
            raise AppError("decision must be approve or deny")
        await _check_limits(request, container, user)
    except AppError as exc:
        return error_page(request, exc.status_code, exc.message, exc.headers)
    code = device.normalise_user_code(raw)
    if code is None:
        return _entry_page(request, user, 400, raw[:20], BAD_FORM)
    async with container.db.session() as session:
        pending = await device.find_pending(session, code)
        decided = pending is not None and await device.decide(session, code, user.id, approve=decision == "approve")
    if pending is None or not decided:
        await _count_failure(request, container, user)
        return _entry_page(request, user, 400, raw[:20], NOT_PENDING)
    stage = "approved" if decision == "approve" else "denied"
    return render(request, "device.html", user=user, stage=stage, device_name=pending.device_name)
