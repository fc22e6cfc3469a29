"""Who is logged in, and CSRF tokens for every form. The contract other pages (OAuth consent) build on.

A logged-in browser holds ``engram_session``: a random token whose SHA-256 is the ``web_sessions`` row id, so a
database leak yields no usable cookie. Forms carry a synchronizer token stored with that row. Before login there is
no row, so forms carry HMAC(secret, nonce) where the nonce sits in the ``engram_csrf`` cookie (a signed double-submit
cookie): a cross-site page can neither read that cookie nor forge its signature.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from litestar import Request
from litestar.datastructures import Cookie
from litestar.response import Redirect
from litestar.types import Message, Scope

from app.accounts.models import User
from app.container import container_of
from app.db import utcnow
from app.errors import Forbidden
from app.web import repository
from app.web.models import WebSession

SESSION_COOKIE = "engram_session"
PRELOGIN_COOKIE = "engram_csrf"
SESSION_TTL = timedelta(days=7)
_TOKEN_MAX = 128
_STATE_USER = "web_user"
_STATE_SESSION = "web_session"
_STATE_COOKIES = "web_pending_cookies"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _secure(request: Request[Any, Any, Any]) -> bool:
    # Plain http is only ever right for local use, where the public URL is http://127.0.0.1 or similar.
    return container_of(request).settings.resolved_public_base_url.startswith("https://")


def make_cookie(request: Request[Any, Any, Any], name: str, value: str, max_age: int | None) -> Cookie:
    """A cookie with the flags every Engram cookie has: HttpOnly, SameSite=Lax, Secure behind https."""
    return Cookie(
        key=name,
        value=value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="lax",
        secure=_secure(request),
    )


def queue_cookie(request: Request[Any, Any, Any], cookie: Cookie) -> None:
    """Send this cookie with whatever response the request ends up with (see ``send_pending_cookies``)."""
    request.state.setdefault(_STATE_COOKIES, []).append(cookie)


async def send_pending_cookies(message: Message, scope: Scope) -> None:
    """A ``before_send`` hook: adds the cookies queued during the request to the response start."""
    if message["type"] != "http.response.start":
        return
    cookies: list[Cookie] = scope.get("state", {}).get(_STATE_COOKIES) or []
    if cookies:
        headers = list(message.get("headers") or [])
        headers.extend(c.to_encoded_header() for c in cookies)
        message["headers"] = headers


async def current_user(request: Request[Any, Any, Any]) -> User | None:
    """The logged-in user, or None. Cached on the request."""
    if _STATE_USER in request.state:
        user: User | None = request.state[_STATE_USER]
        return user
    found: tuple[WebSession, User] | None = None
    token = request.cookies.get(SESSION_COOKIE)
    if token and len(token) <= _TOKEN_MAX:
        async with container_of(request).db.session() as session:
            found = await repository.session_with_user(session, token_hash(token), utcnow())
    request.state[_STATE_SESSION] = found[0] if found else None
    request.state[_STATE_USER] = found[1] if found else None
    return found[1] if found else None


def web_session(request: Request[Any, Any, Any]) -> WebSession | None:
    """The session row ``current_user`` found (call it first)."""
    found: WebSession | None = request.state.get(_STATE_SESSION)
    return found


def login_redirect(request: Request[Any, Any, Any]) -> Redirect:
    """To /login, coming back to this page afterwards."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return Redirect(f"/login?next={quote(target, safe='')}", status_code=303)


def _sign(request: Request[Any, Any, Any], nonce: str) -> str:
    secret = container_of(request).authenticator.secret
    return hmac.new(secret, b"engram-prelogin-csrf:" + nonce.encode(), hashlib.sha256).hexdigest()


def _prelogin_nonce(request: Request[Any, Any, Any]) -> str | None:
    nonce = request.state.get("web_prelogin_nonce") or request.cookies.get(PRELOGIN_COOKIE)
    return nonce if nonce and len(nonce) <= _TOKEN_MAX else None


def csrf_token(request: Request[Any, Any, Any]) -> str:
    """The token to embed in forms as ``_csrf``. Call after ``current_user``."""
    session = web_session(request)
    if session is not None:
        return session.csrf_token
    nonce = _prelogin_nonce(request)
    if nonce is None:
        nonce = secrets.token_urlsafe(32)
        request.state["web_prelogin_nonce"] = nonce
        queue_cookie(request, make_cookie(request, PRELOGIN_COOKIE, nonce, max_age=None))
    return _sign(request, nonce)


async def verify_csrf(request: Request[Any, Any, Any], submitted: str | None) -> None:
    """Raise Forbidden unless ``submitted`` is this browser's current token."""
    await current_user(request)
    session = web_session(request)
    if session is not None:
        expected: str | None = session.csrf_token
    else:
        nonce = request.cookies.get(PRELOGIN_COOKIE)
        expected = _sign(request, nonce) if nonce and len(nonce) <= _TOKEN_MAX else None
    if not expected or not submitted or not hmac.compare_digest(expected.encode(), submitted.encode()):
        raise Forbidden("this form has expired or did not come from this site; reload the page and try again")
