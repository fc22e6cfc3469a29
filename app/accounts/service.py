"""Users and API keys: create, list, revoke, and authenticate a presented key."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts import keys, repository
from app.accounts.models import ApiKey, User
from app.accounts.principal import KEY_SCOPES, Principal, scopes_for
from app.accounts.revocations import note_revoked
from app.db import Database, utcnow
from app.errors import Conflict, InvalidIdentity, NotFound, Overloaded, Unauthorized, ValidationFailed
from app.identity import validate_name

log = logging.getLogger(__name__)

# Writing last_used_at on every request would turn every read into a write; a minute's precision is plenty.
LAST_USED_PRECISION = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class CreatedKey:
    key: ApiKey
    plaintext: str


def normalise_email(email: str) -> str:
    email = email.strip().lower()
    local, at, domain = email.partition("@")
    if not at or not local or "." not in domain or len(email) > 320 or any(c.isspace() for c in email):
        raise ValidationFailed(f"{email!r} is not a valid email address", field="email")
    return email


async def create_user(session: AsyncSession, email: str, password_hash: str | None = None) -> User:
    """Create a user; the email must be new."""
    email = normalise_email(email)
    if await repository.get_user_by_email(session, email) is not None:
        raise Conflict(f"a user with email {email} already exists", field="email")
    user = User(id=keys.new_user_id(), email=email, password_hash=password_hash)
    session.add(user)
    try:
        await session.flush()
    except IntegrityError as exc:
        raise Conflict(f"a user with email {email} already exists", field="email") from exc
    return user


async def list_users(session: AsyncSession) -> Sequence[User]:
    """Every user of this server, oldest first."""
    return await repository.all_users(session)


async def require_user(session: AsyncSession, user_id: str) -> User:
    user = await repository.get_user(session, user_id)
    if user is None:
        raise NotFound(f"no user {user_id}")
    return user


async def create_key(
    session: AsyncSession,
    secret: bytes,
    user_id: str,
    *,
    name: str = "default",
    scope: str = "write",
    bound_session: str | None = None,
    bound_agent: str | None = None,
) -> CreatedKey:
    """Create an API key, bound to one session and agent when both are given. The plaintext is returned here and
    never again."""
    if scope not in KEY_SCOPES:
        raise ValidationFailed(f"scope must be one of {', '.join(KEY_SCOPES)}", field="scope")
    bound_session, bound_agent = _binding(bound_session, bound_agent)
    name = name.strip()
    if not name or len(name) > 100:
        raise ValidationFailed("name must be 1-100 characters", field="name")
    await require_user(session, user_id)
    new = keys.generate_key()
    key = ApiKey(
        id=keys.new_key_id(),
        user_id=user_id,
        name=name,
        scope=scope,
        lookup=new.lookup,
        key_hash=keys.hash_key(secret, new.plaintext),
        session=bound_session,
        agent=bound_agent,
    )
    session.add(key)
    await session.flush()
    return CreatedKey(key=key, plaintext=new.plaintext)


def _binding(session: str | None, agent: str | None) -> tuple[str | None, str | None]:
    """Both or neither, each named by the rules of a session URL's parts."""
    if (session is None) != (agent is None):
        missing = "agent" if agent is None else "session"
        raise ValidationFailed(f"a bound key needs both session and agent; {missing} is missing", field=missing)
    if session is None or agent is None:
        return None, None
    return _name(session, "session"), _name(agent, "agent")


def _name(value: str, part: str) -> str:
    try:
        return validate_name(value, part)
    except InvalidIdentity as exc:
        raise ValidationFailed(exc.message, field=part) from None


async def list_keys(session: AsyncSession, user_id: str) -> Sequence[ApiKey]:
    """All keys of a user, revoked ones included."""
    await require_user(session, user_id)
    return await repository.keys_of(session, user_id)


async def revoke_key(session: AsyncSession, key_id: str, *, user_id: str | None = None) -> ApiKey:
    """Revoke a key (of that user, when given). Takes effect on the next request to this process, and on the other
    processes once they hear of it (``app.accounts.verified_keys``)."""
    key = await repository.key_of(session, user_id, key_id)
    if key is None:
        raise NotFound(f"no API key {key_id}")
    if key.revoked_at is None:
        key.revoked_at = utcnow()
        note_revoked(session, key.user_id)
    return key


async def _note_use(db: Database, key_id: str, now: datetime) -> None:
    """Record when a key was used: through the database's writer (on SQLite the group commit, where a write waits its
    turn instead of for the lock). It is for the owner's eyes, not a condition of the request: a database too busy
    to take it leaves the time of the use before, and the request goes on."""
    try:
        await db.write_statement(repository.touch_key_statement(key_id, now))
    except Overloaded as exc:
        log.info("key %s: its last use was not recorded (%s)", key_id, exc.message)


async def authenticate_key(db: Database, secret: bytes, presented: str) -> Principal:
    """Check a presented API key; records when it was last used."""
    lookup = keys.parse_lookup(presented)
    row = await repository.key_row_by_lookup(db, lookup) if lookup else None
    # Hash even when the lookup failed so that both paths cost the same.
    stored = row.key_hash if row is not None else "0" * 64
    valid = keys.matches(secret, presented, stored)
    if row is None or not valid:
        raise Unauthorized("invalid API key")
    if row.revoked_at is not None:
        raise Unauthorized("this API key has been revoked")
    now = utcnow()
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_PRECISION:
        await _note_use(db, row.id, now)
    return Principal(
        user_id=row.user_id,
        scopes=scopes_for(row.scope),
        key_id=row.id,
        via="api_key",
        session=row.session,
        agent=row.agent,
    )
