"""Who an MCP request acts for, as the endpoint established it before the SDK saw the request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.accounts.principal import Principal
from app.container import Container
from app.identity import Identity

# The key under which the endpoint leaves the Caller in the ASGI scope; the SDK hands that scope to every handler.
SCOPE_KEY = "engram.mcp.caller"


@dataclass(frozen=True, slots=True)
class Caller:
    principal: Principal
    identity: Identity
    client_name: str
    container: Container

    @property
    def in_session(self) -> bool:
        return self.identity.is_session


def caller_from_request(request: Any) -> Caller:
    """The Caller of a handler's request (``ctx.request``, a Starlette Request over the endpoint's scope)."""
    scope = getattr(request, "scope", None)
    caller = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    if not isinstance(caller, Caller):
        raise RuntimeError("MCP request reached a handler without passing the Engram endpoint")
    return caller
