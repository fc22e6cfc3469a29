"""OAuth scopes and what they allow. Pure."""

from __future__ import annotations

from app.accounts.principal import READ, WRITE

MEMORIES_READ = "memories:read"
MEMORIES_WRITE = "memories:write"
SUPPORTED = (MEMORIES_READ, MEMORIES_WRITE)
DEFAULT = f"{MEMORIES_READ} {MEMORIES_WRITE}"

DESCRIPTIONS = {
    MEMORIES_READ: "Search and read your memories, and see your sessions",
    MEMORIES_WRITE: "Add, change and delete your memories, and coordinate sessions",
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


def principal_scopes(scope: str) -> frozenset[str]:
    """As with API keys, write implies read."""
    granted = set(split(scope))
    if MEMORIES_WRITE in granted:
        return frozenset({READ, WRITE})
    if MEMORIES_READ in granted:
        return frozenset({READ})
    return frozenset()
