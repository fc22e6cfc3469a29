"""Who may see which memory. Pure: every read and write derives its visibility keys here.

A memory carries one visibility key:
- ``user``: shared across all of the user's sessions;
- ``s:SESSION``: seen by every agent of that session;
- ``a:SESSION:AGENT``: seen only by that agent in that session.
"""

from __future__ import annotations

from typing import Literal

from app.errors import ValidationFailed
from app.identity import Identity, validate_name

Scope = Literal["user", "session", "agent"]
SCOPES: tuple[Scope, ...] = ("user", "session", "agent")


def viewer(user_id: str, session: str | None, agent: str | None) -> Identity:
    """The identity a request reads and writes as; an agent needs a session."""
    if agent is not None and session is None:
        raise ValidationFailed("agent needs a session: pass session as well", field="agent")
    return Identity(
        user_id,
        validate_name(session, "session") if session is not None else None,
        validate_name(agent, "agent") if agent is not None else None,
    )


def visibility_key(scope: Scope, identity: Identity) -> str:
    """The key a new memory of ``scope`` written by ``identity`` is stored under."""
    if scope == "user":
        return "user"
    if identity.session is None:
        raise ValidationFailed(f"scope {scope!r} needs a session", field="scope")
    if scope == "session":
        return f"s:{identity.session}"
    if identity.agent is None:
        raise ValidationFailed("scope 'agent' needs an agent", field="scope")
    return f"a:{identity.session}:{identity.agent}"


def default_scope(identity: Identity) -> Scope:
    return "session" if identity.session is not None else "user"


def readable_keys(identity: Identity, scope: Scope | None = None) -> list[str]:
    """The visibility keys ``identity`` may read, optionally narrowed to one scope. Never another session's."""
    keys: list[tuple[Scope, str]] = [("user", "user")]
    if identity.session is not None:
        keys.append(("session", f"s:{identity.session}"))
        if identity.agent is not None:
            keys.append(("agent", f"a:{identity.session}:{identity.agent}"))
    return [key for key_scope, key in keys if scope is None or key_scope == scope]


def can_read(identity: Identity, visibility: str) -> bool:
    return visibility in readable_keys(identity)
