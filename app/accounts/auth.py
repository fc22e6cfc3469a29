"""Turn the credentials a request presents into a Principal."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Protocol

from app.accounts import repository, service
from app.accounts.principal import Principal
from app.accounts.verified_keys import VerifiedKeys
from app.db import Database
from app.errors import Unauthorized

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="engram"'}


def presented_credential(headers: Mapping[str, str]) -> str | None:
    """``Authorization: Bearer <key>``, ``Authorization: Token <key>`` (what Mem0's client sends) or
    ``X-API-Key: <key>``: one credential under three spellings, checked by the same rules."""
    authorization = headers.get("authorization")
    if authorization:
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() not in ("bearer", "token") or not value.strip():
            raise Unauthorized("Authorization must be 'Bearer <API key>' or 'Token <API key>'", headers=CHALLENGE)
        return value.strip()
    api_key = headers.get("x-api-key")
    return api_key.strip() if api_key else None


class BearerTokenVerifier(Protocol):
    """OAuth access tokens (app.oauth.verifier): another kind of credential, bound to one resource."""

    def accepts(self, credential: str) -> bool: ...

    def tokens_only(self, resource: str | None) -> bool: ...

    def challenge(
        self, resource: str | None, error: str | None = None, description: str | None = None
    ) -> dict[str, str]: ...

    async def verify(self, credential: str, resource: str | None) -> Principal: ...

    async def still_valid(self, principal: Principal) -> bool: ...


class Authenticator:
    """Checks API keys (and OAuth access tokens) against the database; with ``verified``, a key seen lately is
    answered from memory until its user's credentials are announced revoked (``app.accounts.verified_keys``)."""

    def __init__(
        self,
        db: Database,
        secret: bytes,
        oauth: BearerTokenVerifier | None = None,
        verified: VerifiedKeys | None = None,
    ) -> None:
        self.db = db
        self.secret = secret
        self.oauth = oauth
        self.verified = verified

    async def still_valid(self, principal: Principal) -> bool:
        """Whether the credential ``principal`` came with still holds: streams ask this while they stay open."""
        if principal.via == "api_key":
            return principal.key_id is not None and await repository.key_is_active(self.db, principal.key_id)
        if principal.via == "oauth":
            return self.oauth is not None and await self.oauth.still_valid(principal)
        return True  # the dashboard's own session: its pages check the cookie

    async def authenticate(self, headers: Mapping[str, str], resource: str | None = None) -> Principal:
        """``resource`` is the URL being called (``{base}/v1``, an MCP URL or ``{base}/sync/v1``): OAuth tokens only
        work there, and the sync resource takes nothing else."""
        challenge = self.oauth.challenge(resource) if self.oauth else CHALLENGE
        credential = presented_credential(headers)
        if not credential:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key'", headers=challenge)
        if self.oauth is not None and self.oauth.accepts(credential):
            return await self.oauth.verify(credential, resource)
        if self.oauth is not None and self.oauth.tokens_only(resource):
            raise Unauthorized("this resource takes an OAuth access token, not an API key", headers=challenge)
        if self.verified is not None and (known := self.verified.get(credential)) is not None:
            return known
        epoch = self.verified.epoch if self.verified is not None else 0
        try:
            principal = await service.authenticate_key(self.db, self.secret, credential)
        except Unauthorized as exc:
            raise Unauthorized(exc.message, headers=challenge) from None
        if self.verified is not None:
            self.verified.put(credential, principal, epoch=epoch)
        return principal


class Recheck:
    """Whether a stream's credential still holds, asked at most once per ``interval`` (the answer is kept between)."""

    def __init__(self, authenticator: Authenticator, principal: Principal, interval: float) -> None:
        self.authenticator = authenticator
        self.principal = principal
        self.interval = interval
        self._checked = time.monotonic()
        self._holds = True

    async def holds(self, *, now: bool = False) -> bool:
        """``now``: ask the database whatever the interval (a revocation of this user was just announced)."""
        if self._holds and (now or time.monotonic() - self._checked >= self.interval):
            self._holds = await self.authenticator.still_valid(self.principal)
            self._checked = time.monotonic()
        return self._holds
