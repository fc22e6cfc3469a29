"""HEAD is GET without the content (RFC 9110, 9.3.2), on every path that answers GET.

Uptime monitors, load balancers' health checks and ``curl -I`` send HEAD; Litestar routes only the methods a handler
declares, so they heard 405. This wrapper, before routing, hands a HEAD request to the GET handler and sends the
status and headers (Content-Length included) without the body; ``Allow`` names HEAD wherever it names GET.

A stream (server-sent events) ends right after its headers: the handler then sees its client gone, as when a browser
closes the tab. The paths under ``leave_alone`` (MCP's endpoint) keep their own methods: the transport defines what
each means, and a GET there opens the session's event stream, which HEAD must not do.
"""

from __future__ import annotations

from typing import Any

from litestar.types import ASGIApp, Message, Receive, Scope, Send


def _with_head_allowed(headers: Any) -> list[tuple[bytes, bytes]] | None:
    """``headers`` with HEAD added to an ``Allow`` that names GET, or None when nothing changes (most answers)."""
    for position, (name, value) in enumerate(headers):
        if name.lower() == b"allow":
            methods = [m.strip() for m in value.split(b",")]
            if b"GET" in methods and b"HEAD" not in methods:
                changed = list(headers)
                changed[position] = (name, b", ".join(sorted([*methods, b"HEAD"])))
                return changed
    return None


class HeadAsGet:
    """ASGI wrapper: HEAD served by the GET handler, without the body; HEAD named in ``Allow`` beside GET."""

    def __init__(self, app: ASGIApp, *, leave_alone: str) -> None:
        self.app = app
        self.leave_alone = leave_alone.rstrip("/") + "/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.leave_alone):
            await self.app(scope, receive, send)
            return
        head = scope.get("method") == "HEAD"
        ended = False

        async def send_head_aware(message: Message) -> None:
            nonlocal ended
            if ended:
                return  # the rest of a stream that HEAD already ended
            if message["type"] == "http.response.start":
                headers = _with_head_allowed(message.get("headers", ()))
                await send(message if headers is None else {**message, "headers": headers})
                if head:
                    ended = True
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send(message)

        as_get: Scope = {**scope, "method": "GET"} if head else scope  # type: ignore[assignment]
        await self.app(as_get, receive, send_head_aware)
