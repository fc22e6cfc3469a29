"""Turn the credentials a request presents into a Principal."""

from __future__ import annotations

from collections.abc import Mapping

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


class Authenticator:
    """Checks API keys against the database on every request, so revocation is immediate."""

    def __init__(self, db: Database, secret: bytes) -> None:
        self.db = db
        self.secret = secret

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        credential = presented_credential(headers)
        if not credential:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key'", headers=CHALLENGE)
        try:
            async with self.db.session() as session:
                return await service.authenticate_key(session, self.secret, credential)
        except Unauthorized as exc:
            raise Unauthorized(exc.message, headers=CHALLENGE) from None
