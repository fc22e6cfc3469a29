"""Who a request acts for, once its credential has been checked."""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import Forbidden
from app.identity import Identity

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
    # A credential bound to one session and agent acts only as that agent (both set, or neither). Every identity a
    # request acts as passes act_as or require_identity, so this is the one place the binding is enforced.
    session: str | None = None
    agent: str | None = None

    @property
    def can_write(self) -> bool:
        return WRITE in self.scopes

    @property
    def bound(self) -> bool:
        return self.session is not None

    def require_write(self) -> None:
        if not self.can_write:
            raise Forbidden("this credential has the read scope; writing needs a key with the write scope")

    def act_as(self, session: str | None, agent: str | None) -> tuple[str | None, str | None]:
        """The session and agent a request acts as: a bound credential fills in its own and refuses any other."""
        if not self.bound:
            return session, agent
        if (session is not None and session != self.session) or (agent is not None and agent != self.agent):
            asked = [
                f"{name} {value!r}" for name, value in (("session", session), ("agent", agent)) if value is not None
            ]
            raise Forbidden(f"{self.binding()}; it cannot act as {', '.join(asked)}")
        return self.session, self.agent

    def require_identity(self, identity: Identity) -> None:
        """Refuse an identity (an MCP URL's, say) other than the one a bound credential is bound to."""
        if self.bound and (identity.session, identity.agent) != (self.session, self.agent):
            raise Forbidden(f"{self.binding()}; it cannot open {identity.format()!r}")

    def require_unbound(self, what: str) -> None:
        """Refuse what reaches beyond one agent (a whole-account export, say) to a bound credential."""
        if self.bound:
            raise Forbidden(f"{self.binding()}; {what} needs a credential that is not bound")

    def binding(self) -> str:
        return f"this credential is bound to session {self.session!r} and agent {self.agent!r}"


def scopes_for(scope: str) -> frozenset[str]:
    """A write key can also read."""
    return frozenset({READ, WRITE}) if scope == WRITE else frozenset({READ})
