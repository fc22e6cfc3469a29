"""Passwords and web sessions: sign up, check a login, open and close a browser session."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from functools import lru_cache

import anyio
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts import repository as accounts_repository
from app.accounts import service as accounts
from app.accounts.models import User
from app.db import utcnow
from app.errors import NotFound, ValidationFailed
from app.web import repository
from app.web.models import WebSession
from app.web.session import SESSION_TTL, token_hash

PASSWORD_MIN = 10
PASSWORD_MAX = 256
_COMMON = frozenset(
    {"password", "password1", "password12", "password123", "1234567890", "0123456789", "qwertyuiop", "iloveyou12"}
)
_hasher = PasswordHasher()


@dataclass(frozen=True, slots=True)
class OpenedSession:
    token: str
    session: WebSession


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    return _hasher.hash(secrets.token_urlsafe(16))


def check_password(password: str, email: str) -> None:
    """Reject passwords that are short, common, or the email itself."""
    if len(password) < PASSWORD_MIN:
        raise ValidationFailed(f"use at least {PASSWORD_MIN} characters", field="password")
    if len(password) > PASSWORD_MAX:
        raise ValidationFailed(f"use at most {PASSWORD_MAX} characters", field="password")
    lowered = password.lower()
    if lowered in _COMMON or len(set(password)) < 4 or lowered == email.lower() or lowered == email.split("@")[0]:
        raise ValidationFailed("this password is too easy to guess; pick a longer, less common one", field="password")


async def hash_password(password: str) -> str:
    # argon2 takes ~150 ms of CPU; a thread keeps the event loop serving others meanwhile.
    return await anyio.to_thread.run_sync(_hasher.hash, password)


async def _verify(stored: str, password: str) -> bool:
    def verify() -> bool:
        try:
            return _hasher.verify(stored, password)
        except (VerificationError, InvalidHashError):
            return False

    return await anyio.to_thread.run_sync(verify)


async def signup(session: AsyncSession, email: str, password: str) -> User:
    """Create a user with a password; the email must be new."""
    email = accounts.normalise_email(email)
    check_password(password, email)
    return await accounts.create_user(session, email, await hash_password(password))


async def set_password(session: AsyncSession, user_id: str, password: str) -> User:
    """Give a user (one the CLI created, say, who has none) a new password, held to the sign-up rules; every browser
    session of theirs ends, as after any change of password."""
    user = await accounts_repository.get_user(session, user_id)
    if user is None:
        raise NotFound(f"no user {user_id}")
    check_password(password, user.email)
    user.password_hash = await hash_password(password)
    await session.execute(delete(WebSession).where(WebSession.user_id == user_id))
    return user


async def authenticate(session: AsyncSession, email: str, password: str) -> User | None:
    """The user whose email and password these are, or None."""
    try:
        email = accounts.normalise_email(email)
    except ValidationFailed:
        return None
    user = await accounts_repository.get_user_by_email(session, email)
    stored = user.password_hash if user is not None and user.password_hash else None
    # Verify against a dummy hash for unknown emails so that timing does not reveal which emails exist.
    valid = await _verify(stored or _dummy_hash(), password[:PASSWORD_MAX])
    if user is None or stored is None or not valid:
        return None
    if _hasher.check_needs_rehash(stored):
        user.password_hash = await hash_password(password)
    return user


async def open_session(session: AsyncSession, user_id: str) -> OpenedSession:
    """A new browser session; the token goes into the cookie and is never stored."""
    now = utcnow()
    await repository.delete_expired(session, user_id, now)
    token = secrets.token_urlsafe(32)
    row = WebSession(
        id=token_hash(token),
        user_id=user_id,
        csrf_token=secrets.token_urlsafe(32),
        created_at=now,
        expires_at=now + SESSION_TTL,
    )
    session.add(row)
    await session.flush()
    return OpenedSession(token=token, session=row)


async def close_session(session: AsyncSession, token: str) -> None:
    """End the browser session this cookie token belongs to."""
    await repository.delete_session(session, token_hash(token))
