"""Around every HTTP request: a request id, the request metrics, and one access log line.

It wraps Litestar's whole ASGI handler rather than sitting in the route middleware, so that requests no route
matched (404, 405) and the ASGI mounts (MCP) are measured and logged the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, cast

from litestar import Litestar
from litestar.types import ASGIApp, HTTPScope, Message, Receive, Scope, Send

from app.observability.metrics import Metrics
from app.observability.redaction import redact
from app.observability.request_id import HEADER, enter, leave, request_id_from

access_log = logging.getLogger("engram.access")

UNMATCHED = "<unmatched>"
MOUNT = "<mount>"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class ObservabilityMiddleware:
    """``mount_templates`` names what a mount's requests are counted under, e.g. the MCP URL's template."""

    def __init__(self, app: ASGIApp, metrics: Metrics, mount_templates: Mapping[str, str] | None = None) -> None:
        self.app = app
        self.metrics = metrics
        self.mount_templates = dict(mount_templates or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_from(scope["headers"])
        context, token = enter(request_id)
        raw_method = cast("HTTPScope", scope)["method"]
        method = raw_method if raw_method in _METHODS else "OTHER"
        path = scope["path"]  # the router rewrites scope["path"] for mounts; keep what the client asked for
        status = 500
        header = (HEADER.encode(), request_id.encode())

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [h for h in message.get("headers") or [] if h[0].lower() != HEADER.encode()]
                message = {**message, "headers": [*headers, header]}
            await send(message)

        started = time.perf_counter()
        self.metrics.http_in_progress.inc()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.http_in_progress.dec()
            template = self.template_of(scope, path)
            self.metrics.http_requests.labels(method, template, str(status)).inc()
            self.metrics.http_duration.labels(method, template).observe(elapsed)
            fields: dict[str, Any] = {
                "method": method,
                "path": redact(path),
                "status": status,
                "duration_ms": round(elapsed * 1000, 2),
            }
            if context.user_id:
                fields["user_id"] = context.user_id
            access_log.info("%s %s %s %.1fms", method, fields["path"], status, elapsed * 1000, extra=fields)
            leave(token)

    def template_of(self, scope: Scope, path: str) -> str:
        """The route template that matched, never the raw path: label values must not grow with ids."""
        if getattr(scope.get("route_handler"), "is_mount", False):
            # Litestar leaves no template for a mount; the mount's prefix names it.
            for prefix, template in self.mount_templates.items():
                if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                    return template
            return MOUNT
        return scope.get("path_template") or UNMATCHED


def install(app: Litestar, metrics: Metrics, mount_templates: Mapping[str, str] | None = None) -> None:
    """Put the middleware around the app's whole ASGI handler (inside Litestar's own ``send`` wrapping)."""
    app.asgi_handler = ObservabilityMiddleware(app.asgi_handler, metrics, mount_templates)
