"""The request being served: its id (from ``X-Request-ID`` or generated) and, once known, who made it."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from contextvars import ContextVar, Token
from dataclasses import dataclass

HEADER = "x-request-id"
_SANE = re.compile(r"[A-Za-z0-9._-]{1,128}")


@dataclass
class RequestContext:
    request_id: str
    user_id: str | None = None


# Holds a mutable object so that what a dependency learns in a child task (the user) reaches the access line.
_current: ContextVar[RequestContext | None] = ContextVar("engram_request", default=None)


def current() -> RequestContext | None:
    return _current.get()


def current_request_id() -> str | None:
    context = _current.get()
    return context.request_id if context else None


def note_user(user_id: str) -> None:
    """Record the authenticated user of the current request, for its access log line."""
    context = _current.get()
    if context is not None:
        context.user_id = user_id


def request_id_from(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The client's ``X-Request-ID`` when it is a sane token, else a new id."""
    for name, value in headers:
        if name.lower() == HEADER.encode():
            candidate = value.decode("latin-1")
            if _SANE.fullmatch(candidate):
                return candidate
            break
    return uuid.uuid4().hex


def enter(request_id: str) -> tuple[RequestContext, Token[RequestContext | None]]:
    context = RequestContext(request_id)
    return context, _current.set(context)


def leave(token: Token[RequestContext | None]) -> None:
    _current.reset(token)
