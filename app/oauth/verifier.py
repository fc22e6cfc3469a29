"""Checking an OAuth access token presented to ``/v1``, an MCP endpoint or the sync resource (see ``resources`` for the
binding rule, ``scopes`` for which scopes count where)."""

from __future__ import annotations

from app.accounts.principal import Principal
from app.db import Database, utcnow
from app.errors import Forbidden, Unauthorized
from app.oauth import credentials, repository, resources, scopes


class OAuthTokenVerifier:
    """Used by the Authenticator for credentials that look like our access tokens; reads the database every time,
    so revocation is immediate."""

    def __init__(self, db: Database, base: str) -> None:
        self.db = db
        self.base = base

    async def still_valid(self, principal: Principal) -> bool:
        """Whether the grant behind ``principal`` still has an unrevoked, unexpired access token."""
        return principal.key_id is not None and await repository.family_is_active(self.db, principal.key_id, utcnow())

    def accepts(self, credential: str) -> bool:
        return credentials.looks_like_access_token(credential)

    def _is_sync(self, resource: str | None) -> bool:
        parsed = resources.parse(self.base, resource) if resource else None
        return parsed is not None and parsed.sync

    def tokens_only(self, resource: str | None) -> bool:
        """The sync resource takes OAuth access tokens and nothing else: an API key never acts on it."""
        return self._is_sync(resource)

    def challenge(
        self, resource: str | None, error: str | None = None, description: str | None = None
    ) -> dict[str, str]:
        scope = scopes.SYNC if self._is_sync(resource) else scopes.DEFAULT
        return resources.bearer_challenge(resource, scope, error, description)

    def _refuse(self, resource: str | None, description: str) -> Unauthorized:
        return Unauthorized(description, headers=self.challenge(resource, "invalid_token", description))

    async def verify(self, credential: str, resource: str | None) -> Principal:
        """The principal the token acts for on ``resource``; Unauthorized (401) otherwise."""
        row = await repository.access_row(self.db, credentials.digest(credential))
        if row is None:
            raise self._refuse(resource, "unknown access token")
        if row.revoked_at is not None:
            raise self._refuse(resource, "the access token has been revoked")
        if row.client_revoked_at is not None:
            raise self._refuse(resource, "the client this token was issued to has been revoked")
        if row.access_expires_at <= utcnow():
            raise self._refuse(resource, "the access token has expired")
        if row.registering_key_revoked:
            raise self._refuse(resource, "the API key that registered this client has been revoked")
        requested = resources.parse(self.base, resource) if resource else None
        if requested is None or requested.url != row.resource:
            raise self._refuse(resource, f"the access token is for {row.resource}, not for this resource")
        granted = scopes.principal_scopes(row.scope, sync=requested.sync)
        if not granted:
            # None is issued (server._generate_token, grants.ResourceBound); one stored earlier must not act either.
            if requested.sync:
                description = f"the access token does not have the {scopes.SYNC} scope"
            else:
                description = f"the access token has neither {scopes.MEMORIES_READ} nor {scopes.MEMORIES_WRITE}"
            raise Forbidden(description, headers=self.challenge(resource, "insufficient_scope", description))
        # The grant (token family) stays the same across refreshes, so MCP sessions bound to it survive them. A token
        # for a session URL carries that session and agent, as a bound key does: the same rules then hold it there.
        return Principal(
            row.user_id,
            granted,
            key_id=row.family_id,
            via="oauth",
            session=requested.session,
            agent=requested.agent,
        )
