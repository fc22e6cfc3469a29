"""OAuth state: registered clients, authorization codes and issued tokens. Codes and tokens are stored as hashes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

# A Client ID Metadata Document's client_id is its URL; codes and tokens keep it without a foreign key.
CLIENT_ID_MAX = 512
URL_MAX = 2000


class OAuthClient(Base):
    """A client registered through RFC 7591. Clients identified by a metadata document URL are not stored."""

    __tablename__ = "oauth_clients"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # SHA-256 of the secret; None for public clients.
    secret_hash: Mapped[str | None] = mapped_column(String(64), default=None)
    # The user a machine (client_credentials) client acts as; None for clients anyone may authorize.
    owner_id: Mapped[str | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True, default=None)
    client_metadata: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # The API key a machine client was registered with: revoking that key cuts the client and its tokens off.
    registered_with_key: Mapped[str | None] = mapped_column(String(32), index=True, default=None)
    # A revoked client gets no token, and every token it had is revoked with it.
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class OAuthCode(Base):
    __tablename__ = "oauth_codes"

    # SHA-256 of the code.
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    client_id: Mapped[str] = mapped_column(String(CLIENT_ID_MAX))
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    redirect_uri: Mapped[str] = mapped_column(String(URL_MAX))
    scope: Mapped[str] = mapped_column(String(255))
    resource: Mapped[str] = mapped_column(String(URL_MAX))
    code_challenge: Mapped[str] = mapped_column(String(128))
    # Every token issued from this code, and from its refresh tokens, shares this family.
    family_id: Mapped[str] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column()
    used_at: Mapped[datetime | None] = mapped_column(default=None)


class OAuthToken(Base):
    """One issued access token and, when the grant allows it, its refresh token."""

    __tablename__ = "oauth_tokens"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    family_id: Mapped[str] = mapped_column(String(40), index=True)
    client_id: Mapped[str] = mapped_column(String(CLIENT_ID_MAX), index=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    grant_type: Mapped[str] = mapped_column(String(32))
    scope: Mapped[str] = mapped_column(String(255))
    resource: Mapped[str] = mapped_column(String(URL_MAX))
    access_hash: Mapped[str] = mapped_column(String(64), unique=True)
    access_expires_at: Mapped[datetime] = mapped_column()
    refresh_hash: Mapped[str | None] = mapped_column(String(64), unique=True, default=None)
    refresh_expires_at: Mapped[datetime | None] = mapped_column(default=None)
    # Set when the refresh token was exchanged: presenting it again is reuse.
    refresh_used_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class OAuthDeviceCode(Base):
    """One device authorization request (RFC 8628): pending until a person approves or denies its user code, then
    redeemed once for tokens. Both codes are stored as hashes."""

    __tablename__ = "oauth_device_codes"

    # SHA-256 of the device code (what the device polls with).
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # SHA-256 of the normalised user code (what the person types).
    user_code: Mapped[str] = mapped_column(String(64), unique=True)
    client_id: Mapped[str] = mapped_column(String(CLIENT_ID_MAX), index=True)
    scope: Mapped[str] = mapped_column(String(255))
    resource: Mapped[str] = mapped_column(String(URL_MAX))
    # Every token issued for this request, and from its refresh tokens, shares this family.
    family_id: Mapped[str] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(index=True)
    # The polling interval in seconds: it grows by 5 at every slow_down (RFC 8628 section 3.5).
    interval: Mapped[int] = mapped_column(Integer)
    polled_at: Mapped[datetime | None] = mapped_column(default=None)
    # Who decided, and how: "approved" or "denied".
    user_id: Mapped[str | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True, default=None)
    decision: Mapped[str | None] = mapped_column(String(16), default=None)
    decided_at: Mapped[datetime | None] = mapped_column(default=None)
    # Set when the device code was exchanged for tokens: it is good for one exchange.
    used_at: Mapped[datetime | None] = mapped_column(default=None)
