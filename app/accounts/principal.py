"""Who a request acts for, once its credential has been checked."""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import Forbidden

READ = "read"
WRITE = "write"
KEY_SCOPES = (READ, WRITE)


@dataclass(frozen=True, slots=True)
class Principal:
    user_id: str
    scopes: frozenset[str]
    key_id: str | None = None
    # "api_key" or "oauth": how the caller proved who they are.
    via: str = "api_key"

    @property
    def can_write(self) -> bool:
        return WRITE in self.scopes

    def require_write(self) -> None:
        if not self.can_write:
            raise Forbidden("this credential has the read scope; writing needs a key with the write scope")


def scopes_for(scope: str) -> frozenset[str]:
    """A write key can also read."""
    return frozenset({READ, WRITE}) if scope == WRITE else frozenset({READ})
