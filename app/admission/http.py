"""Admission for HTTP: REST requests take their slot once authenticated and give it back once answered.

The slot is taken in the principal dependency (the tenant and its plan are known only then) and given back by
``ReleaseSlots``, which wraps Litestar's handler: a response is sent in full before the slot is free, so a slow
reader counts as the work it is. Streams (routes with ``opt={"stream": True}``: Server-Sent Events) never take one:
they last for hours and cost nothing while idle.
"""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.types import ASGIApp, Receive, Scope, Send

from app.accounts.principal import Principal
from app.admission.gate import Admission, Ticket
from app.quotas.plans import Plan

_HELD = "engram.admission"
STREAM = {"stream": True}


class ReleaseSlots:
    """Outermost around Litestar's handler (inside the access log): leaves every slot the request took."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: list[tuple[Admission, Ticket]] = []
        scope.setdefault("state", {})[_HELD] = held
        try:
            await self.app(scope, receive, send)
        finally:
            for admission, ticket in held:
                admission.leave(ticket)


async def admit(request: Request[Any, Any, Any], admission: Admission, principal: Principal, plan: Plan) -> None:
    """Take a slot for this request unless it is a stream; 429/503 with Retry-After when refused."""
    handler = request.scope.get("route_handler")
    if handler is None or handler.opt.get("stream"):
        return
    held: list[tuple[Admission, Ticket]] | None = request.scope.get("state", {}).get(_HELD)
    if held is None:  # an app built without ReleaseSlots (nothing would give the slot back): no admission
        return
    kind = f"{request.method} {handler.handler_name}"
    ticket = await admission.enter(principal.user_id, kind, weight=plan.weight, tenant_class=plan.name)
    held.append((admission, ticket))
