"""Random tokens, codes and client secrets, and the hashes that are all the database keeps of them. Pure."""

from __future__ import annotations

import hashlib
import hmac
import secrets

ACCESS_PREFIX = "ego_"
REFRESH_PREFIX = "egr_"
CLIENT_PREFIX = "egc_"
_TOKEN_BYTES = 32


def digest(value: str) -> str:
    """SHA-256: these values carry 256 random bits, so no salt or key is needed to make the hash useless."""
    return hashlib.sha256(value.encode()).hexdigest()


def matches(value: str, stored: str) -> bool:
    return hmac.compare_digest(digest(value), stored)


def new_access_token() -> str:
    return ACCESS_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)


def new_refresh_token() -> str:
    return REFRESH_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)


def new_code() -> str:
    return secrets.token_urlsafe(_TOKEN_BYTES)


def new_client_id() -> str:
    return CLIENT_PREFIX + secrets.token_hex(12)


def new_client_secret() -> str:
    return secrets.token_urlsafe(_TOKEN_BYTES)


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def looks_like_access_token(value: str) -> bool:
    return value.startswith(ACCESS_PREFIX)
