"""OAuth scopes, what they allow, and which resource each belongs to. Pure.

The memories scopes act on ``/v1`` and MCP URLs; ``sync`` acts on the sync resource (``/sync/v1``) and nowhere else.
A token is issued for one resource with scopes of that resource only, and checked the same way where it is used.
"""

from __future__ import annotations

from app.accounts.principal import READ, WRITE

MEMORIES_READ = "memories:read"
MEMORIES_WRITE = "memories:write"
SYNC = "sync"
MEMORIES = (MEMORIES_READ, MEMORIES_WRITE)
SUPPORTED = (*MEMORIES, SYNC)
DEFAULT = f"{MEMORIES_READ} {MEMORIES_WRITE}"

DESCRIPTIONS = {
    MEMORIES_READ: "Search and read your memories, and see your sessions",
    MEMORIES_WRITE: "Add, change and delete your memories, and coordinate sessions",
    SYNC: "Replicate all your memories to and from this machine, both ways (read, write and delete)",
}


def split(scope: str | None) -> list[str]:
    """Scope tokens in a stable order, without repeats."""
    seen: list[str] = []
    for item in (scope or "").split():
        if item not in seen:
            seen.append(item)
    return seen


def join(scopes: list[str]) -> str:
    return " ".join(s for s in SUPPORTED if s in scopes)


def on_resource(sync: bool) -> tuple[str, ...]:
    """The scopes a token for the sync resource (``sync``) or for a memories resource may carry."""
    return (SYNC,) if sync else MEMORIES


def grantable(requested: str | None, client_scope: str | None, sync: bool) -> str | None:
    """What to grant on a resource: the requested scopes (all the client may have there when none are) that both the
    client and the resource allow; None when that is nothing. A client registered without a scope may have the
    memories scopes, never ``sync``."""
    allowed = [s for s in on_resource(sync) if s in (split(client_scope) or MEMORIES)]
    wanted = split(requested) or allowed
    return join([s for s in wanted if s in allowed]) or None


def principal_scopes(scope: str, sync: bool = False) -> frozenset[str]:
    """What a token's scope lets its principal do on the resource it is bound to: as with API keys, write implies read;
    on the sync resource, ``sync`` and nothing else."""
    granted = set(split(scope))
    if sync:
        return frozenset({SYNC}) if SYNC in granted else frozenset()
    if MEMORIES_WRITE in granted:
        return frozenset({READ, WRITE})
    if MEMORIES_READ in granted:
        return frozenset({READ})
    return frozenset()
