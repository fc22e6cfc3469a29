"""Tell Mem0's calls from Engram's on the paths both APIs use.

Engram's REST has ``/v1/memories``, ``/v1/memories/{id}`` and ``/v1/memories/{id}/history``; Mem0's client calls the
same paths (with other methods too) with a trailing slash and ``Authorization: Token``, and wants Mem0's shapes back.
Routing ignores a trailing slash, so this wrapper, before routing, moves such a call to the Mem0 routes' own prefix.
Engram's callers (no trailing slash, Bearer or X-API-Key) reach Engram's routes exactly as before.
"""

from __future__ import annotations

import re
from typing import Any

from litestar.types import ASGIApp, Receive, Scope, Send

SHARED_PREFIX = "/mem0-shared"
_SHARED = re.compile(r"^/v1/memories(?:/([^/]+)(/history)?)?/?$")
# method -> which of /v1/memories, /v1/memories/{id} and /v1/memories/{id}/history Mem0 calls with it.
_METHODS = {"GET": ("one", "history"), "DELETE": ("all", "one"), "PUT": ("one",)}


def is_mem0_call(scope: Scope) -> bool:
    """A trailing slash or the ``Token`` scheme: how Mem0's client, and only it, calls."""
    if scope["path"].endswith("/"):
        return True
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return value[:6].lower() == b"token "
    return False


class Mem0Paths:
    """ASGI wrapper: Mem0's calls on a shared path go to the Mem0 routes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            match = _SHARED.match(scope["path"])
            allowed = _METHODS.get(str(scope.get("method", "")))
            kind = None if not match else "history" if match.group(2) else "one" if match.group(1) else "all"
            if match and allowed is not None and kind in allowed and is_mem0_call(scope):
                path = SHARED_PREFIX + scope["path"].rstrip("/")
                moved: dict[str, Any] = {**scope, "path": path, "raw_path": path.encode()}
                await self.app(moved, receive, send)  # type: ignore[arg-type]
                return
        await self.app(scope, receive, send)
