"""What a form's result page shows once, after the redirect that follows the POST (post/redirect/get).

A POST that changes something answers 303, so reloading the page it lands on repeats nothing. What that page must
say (a notice such as "key revoked", or a new API key, shown only this once) rides in the ``engram_flash`` cookie:
encrypted and authenticated with the server's secret (Fernet), bound to the browser session that made it, valid for
two minutes, HttpOnly, and deleted by the page that shows it. The server keeps nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from litestar import Request
from litestar.datastructures import Cookie
from litestar.response import Redirect

from app.container import container_of
from app.web.session import make_cookie, queue_cookie, web_session

FLASH_COOKIE = "engram_flash"
TTL_SECONDS = 120
_MAX_COOKIE = 3000
_STATE = "web_flash"


@dataclass(frozen=True, slots=True)
class Flash:
    notice: str | None = None
    new_key: str | None = None


def _fernet(request: Request[Any, Any, Any]) -> Fernet:
    secret = container_of(request).authenticator.secret
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(b"engram-flash:" + secret).digest()))


def _session_id(request: Request[Any, Any, Any]) -> str:
    session = web_session(request)
    return session.id if session is not None else ""


def redirect_with(request: Request[Any, Any, Any], target: str, flash: Flash) -> Redirect:
    """A 303 to ``target`` whose page shows ``flash`` once. Call after ``current_user`` (the pages' ``user``)."""
    payload = {"s": _session_id(request), "n": flash.notice, "k": flash.new_key}
    token = _fernet(request).encrypt(json.dumps(payload).encode()).decode()
    cookie = make_cookie(request, FLASH_COOKIE, token, max_age=TTL_SECONDS)
    return Redirect(target, status_code=303, cookies=[cookie])


def take_flash(request: Request[Any, Any, Any]) -> Flash:
    """The flash this browser session was sent, once: the cookie is deleted with this response."""
    taken: Flash | None = request.state.get(_STATE)
    if taken is None:
        taken = request.state[_STATE] = _read(request)
    return taken


def _read(request: Request[Any, Any, Any]) -> Flash:
    token = request.cookies.get(FLASH_COOKIE)
    if not token:
        return Flash()
    queue_cookie(request, _expired(request))
    if len(token) > _MAX_COOKIE:
        return Flash()
    try:
        payload = json.loads(_fernet(request).decrypt(token.encode(), ttl=TTL_SECONDS))
    except (InvalidToken, ValueError):
        return Flash()
    if not isinstance(payload, dict) or payload.get("s") != _session_id(request):
        return Flash()
    notice, new_key = payload.get("n"), payload.get("k")
    return Flash(
        notice=notice if isinstance(notice, str) else None, new_key=new_key if isinstance(new_key, str) else None
    )


def _expired(request: Request[Any, Any, Any]) -> Cookie:
    return make_cookie(request, FLASH_COOKIE, "", max_age=0)
