"""Who may see which memory. Pure: every read and write derives its visibility keys here.

A memory carries one visibility key, so that every read filters on one indexed condition (key IN readable keys):
- ``user``: shared across all of the user's sessions;
- ``s:SESSION``: seen by every agent of that session;
- ``a:SESSION:AGENT``: seen only by that agent in that session;
- ``r:ROLE``: seen by every agent of the user that joined its session with that role, in any session;
- ``p:SESSION:AGENT`` (``p::`` for the user outside a session): a private memory, whatever its scope, seen only by
  the agent that wrote it. Its scope and role stay on the record, so that it can be made public later.
Memories written before roles and private memories existed carry the first three keys and are public.
"""

from __future__ import annotations

from typing import Literal

from app.accounts.principal import Principal
from app.errors import Conflict, ValidationFailed
from app.identity import Identity, validate_name

Scope = Literal["user", "session", "agent", "role"]
SCOPES: tuple[Scope, ...] = ("user", "session", "agent", "role")
Visibility = Literal["public", "private"]
PRIVATE_PREFIX = "p:"
ROLE_PREFIX = "r:"

# How far each scope reaches. A memory may move only to a scope that reaches every reader it reached before
# (agent -> session, role or user; session or role -> user); session and role reach different readers.
_WIDER: dict[Scope, frozenset[Scope]] = {
    "agent": frozenset({"session", "role", "user"}),
    "session": frozenset({"user"}),
    "role": frozenset({"user"}),
    "user": frozenset(),
}


def viewer(principal: Principal, session: str | None, agent: str | None) -> Identity:
    """The identity a request reads and writes as; an agent needs a session. A credential bound to one session and
    agent acts as that agent whatever the request names (Principal.act_as refuses any other)."""
    session, agent = principal.act_as(session, agent)
    if agent is not None and session is None:
        raise ValidationFailed("agent needs a session: pass session as well", field="agent")
    return Identity(
        principal.user_id,
        validate_name(session, "session") if session is not None else None,
        validate_name(agent, "agent") if agent is not None else None,
    )


def private_key(identity: Identity) -> str:
    """The key of the private memories ``identity`` writes: only the same session and agent read them."""
    return f"{PRIVATE_PREFIX}{identity.session or ''}:{identity.agent or ''}"


def visibility_key(
    scope: Scope, identity: Identity, *, role: str | None = None, visibility: Visibility = "public"
) -> str:
    """The key a memory of ``scope`` written by ``identity`` (which joined with ``role``) is stored under."""
    public = _public_key(scope, identity, role)
    return private_key(identity) if visibility == "private" else public


def _public_key(scope: Scope, identity: Identity, role: str | None) -> str:
    if scope == "user":
        return "user"
    if scope == "role":
        if role is None:
            # The request is sound; the session's state (no role joined) refuses it.
            raise Conflict(
                "scope 'role' needs a role: join the session first (session_join, or POST /v1/sessions/{session}/"
                "agents?agent=NAME)",
                field="scope",
            )
        return f"{ROLE_PREFIX}{role}"
    if identity.session is None:
        raise ValidationFailed(f"scope {scope!r} needs a session", field="scope")
    if scope == "session":
        return f"s:{identity.session}"
    if identity.agent is None:
        raise ValidationFailed("scope 'agent' needs an agent", field="scope")
    return f"a:{identity.session}:{identity.agent}"


def default_scope(identity: Identity) -> Scope:
    return "session" if identity.session is not None else "user"


def readable_keys(identity: Identity, scope: Scope | None = None, *, role: str | None = None) -> list[str]:
    """The visibility keys ``identity`` (joined with ``role``) may read. Never another session's, another role's or
    another agent's private ones. With ``scope``, only keys that can hold memories of that scope: the caller then
    also filters on the scope itself, since its own private key holds memories of every scope."""
    keys: list[tuple[Scope | None, str]] = [("user", "user")]
    if identity.session is not None:
        keys.append(("session", f"s:{identity.session}"))
        if identity.agent is not None:
            keys.append(("agent", f"a:{identity.session}:{identity.agent}"))
            if role is not None:
                keys.append(("role", f"{ROLE_PREFIX}{role}"))
    keys.append((None, private_key(identity)))
    return [key for key_scope, key in keys if scope is None or key_scope in (scope, None)]


def can_read(identity: Identity, visibility: str, *, role: str | None = None) -> bool:
    return visibility in readable_keys(identity, role=role)


def visibility_of(key: str) -> Visibility:
    """Whether a stored key is a private one."""
    return "private" if key.startswith(PRIVATE_PREFIX) else "public"


def reachable_scopes(scope: Scope) -> list[Scope]:
    """The scopes a memory of ``scope`` may be moved to (itself first, then narrowest to widest): the choices an edit
    form offers."""
    wider = sorted((s for s in SCOPES if s in _WIDER[scope]), key=lambda s: -len(_WIDER[s]))
    return [scope, *wider]


def check_widening(old: Scope, new: Scope, old_visibility: Visibility, new_visibility: Visibility) -> None:
    """A memory's reach may grow, never shrink: anything else is refused, naming the move. A conflict (409) with the
    memory as it stands, not a malformed request."""
    if new != old and new not in _WIDER[old]:
        reason = "narrowing" if old in _WIDER[new] else "moving between scopes that reach different readers"
        raise Conflict(
            f"scope {old} -> {new} is refused ({reason}); a memory's scope can only be widened: "
            "agent -> session, role or user; session or role -> user",
            field="scope",
        )
    if old_visibility == "public" and new_visibility == "private":
        raise Conflict(
            "visibility public -> private is refused: a shared memory cannot be taken back", field="visibility"
        )
