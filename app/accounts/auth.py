"""Turn the credentials a request presents into a Principal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from app.accounts import service
from app.accounts.principal import Principal
from app.db import Database
from app.errors import Unauthorized

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="engram"'}


def presented_credential(headers: Mapping[str, str]) -> str | None:
    """``Authorization: Bearer <key>`` or ``X-API-Key: <key>``."""
    authorization = headers.get("authorization")
    if authorization:
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthorized("Authorization must be 'Bearer <API key>'", headers=CHALLENGE)
        return value.strip()
    api_key = headers.get("x-api-key")
    return api_key.strip() if api_key else None


class BearerTokenVerifier(Protocol):
    """OAuth access tokens (app.oauth.verifier): another kind of credential, bound to one resource."""

    def accepts(self, credential: str) -> bool: ...

    def challenge(self, resource: str | None) -> dict[str, str]: ...

    async def verify(self, credential: str, resource: str | None) -> Principal: ...


class Authenticator:
    """Checks API keys (and OAuth access tokens) against the database on every request, so revocation is immediate."""

    def __init__(self, db: Database, secret: bytes, oauth: BearerTokenVerifier | None = None) -> None:
        self.db = db
        self.secret = secret
        self.oauth = oauth

    async def authenticate(self, headers: Mapping[str, str], resource: str | None = None) -> Principal:
        """``resource`` is the URL being called (``{base}/v1`` or an MCP URL): OAuth tokens only work there."""
        challenge = self.oauth.challenge(resource) if self.oauth else CHALLENGE
        credential = presented_credential(headers)
        if not credential:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key'", headers=challenge)
        if self.oauth is not None and self.oauth.accepts(credential):
            return await self.oauth.verify(credential, resource)
        try:
            return await service.authenticate_key(self.db, self.secret, credential)
        except Unauthorized as exc:
            raise Unauthorized(exc.message, headers=challenge) from None
