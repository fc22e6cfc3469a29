"""Admission for HTTP: REST requests take their slot once authenticated and their body has arrived, and give it
back once answered.

The slot is taken in the principal dependency (the tenant and its plan are known only then) and given back by
``ReleaseSlots``, which wraps Litestar's handler: a response is sent in full before the slot is free, so a slow
reader counts as the work it is. The body is read first, within ``request_body_seconds`` (408 beyond): a client that
declares a body and sends it slowly, or never, must hold no slot, or a few such connections of one tenant would leave
every tenant 503s, and its upload time would count as service time in the learned limit. A route that reads its own
body in chunks (``opt={"own_body": True}``: an import, bounded by its own limit) is admitted by ``admit_after_body``
once it has it. Streams (routes with ``opt={"stream": True}``: Server-Sent Events) never take one: they last for
hours and cost nothing while idle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from litestar import Request
from litestar.types import ASGIApp, Receive, Scope, Send

from app.accounts.principal import Principal
from app.admission.gate import Admission, Ticket
from app.quotas.plans import Plan
from app.request_body import arrived

_HELD = "engram.admission"
_PLAN = "engram.plan"
STREAM = {"stream": True}
OWN_BODY = {"own_body": True}


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


async def admit(
    request: Request[Any, Any, Any], admission: Admission, principal: Principal, plan: Plan, *, body_seconds: float
) -> None:
    """Take a slot for this request, once its body is here, unless it is a stream or reads its own body; 429/503
    with Retry-After when refused, 408 when the body does not arrive within ``body_seconds``."""
    handler = request.scope.get("route_handler")
    if handler is None or handler.opt.get("stream"):
        return
    if handler.opt.get("own_body"):
        request.scope.setdefault("state", {})[_PLAN] = (admission, plan)
        return
    await arrived(request.body(), body_seconds)
    await _enter(request, admission, principal, plan)


async def admit_after_body(request: Request[Any, Any, Any], principal: Principal) -> None:
    """For a route with ``OWN_BODY``: take the slot ``admit`` left for it, now that the body is in hand."""
    pending: tuple[Admission, Plan] | None = request.scope.get("state", {}).pop(_PLAN, None)
    if pending is not None:
        await _enter(request, pending[0], principal, pending[1])


async def body_chunks(request: Request[Any, Any, Any], body_seconds: float) -> AsyncIterator[bytes]:
    """The body as it arrives, for a route with ``OWN_BODY``: the same deadline and disconnect handling as
    ``admit``'s, for each chunk."""
    chunks = request.stream().__aiter__()
    while True:
        try:
            chunk = await arrived(anext(chunks), body_seconds)
        except StopAsyncIteration:
            return
        yield chunk


async def _enter(request: Request[Any, Any, Any], admission: Admission, principal: Principal, plan: Plan) -> None:
    held: list[tuple[Admission, Ticket]] | None = request.scope.get("state", {}).get(_HELD)
    if held is None:  # an app built without ReleaseSlots (nothing would give the slot back): no admission
        return
    handler = request.scope["route_handler"]
    kind = f"{request.method} {handler.handler_name}"
    ticket = await admission.enter(principal.user_id, kind, weight=plan.weight, tenant_class=plan.name)
    held.append((admission, ticket))
