"""What a node holds on an edge: its OAuth client and its tokens, as a link stores them.

Plain data, apart from the calls that get them (``app.sync.credentials``): ``engram sync status`` reads links without
importing the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True, slots=True)
class NodeClient:
    """The OAuth client a node is on the edge: a public device client, or a sync client with its secret."""

    client_id: str
    client_secret: str | None = None


@dataclass(frozen=True, slots=True)
class Tokens:
    access_token: str
    # None for client credentials: renew() asks for a new token with the secret instead.
    refresh_token: str | None
    # None when the edge did not say; the token then lives until a request is refused.
    expires_at: datetime | None
    scope: str
    resource: str

    def expires_within(self, seconds: float, now: datetime | None = None) -> bool:
        """Whether to renew before using it (a token that expires mid-request gets a 401)."""
        if self.expires_at is None:
            return False
        return self.expires_at - (now or datetime.now(UTC)) <= timedelta(seconds=seconds)
