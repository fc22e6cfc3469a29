"""Deleting an account everywhere Engram keeps it: rows, vectors, change log, coordination state, credentials.

One database transaction removes every row that names the user: every table with a ``user_id``, ``owner_id`` or
``local_user_id`` column (found from the models, so a table added later is covered without a change here), the
OAuth clients registered with its keys, and the user. The same transaction records the digests of its sync
credentials (``ErasedCredential``) so that linked machines hear 410 ``account_deleted``; after it, the user is
announced revoked, so that its open streams (SSE, MCP) end. Then the index drops its points and coordination
drops its sessions' claims, presence and feeds.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from sqlalchemy import ColumnElement, Table, delete, insert, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.models import ApiKey, User
from app.accounts.revocations import note_erased
from app.coordination import Coordination
from app.db import Base, Database, utcnow
from app.errors import NotFound
from app.memories.engine import MemoryEngine
from app.memories.models import MemoryRecord
from app.models import load_all_models
from app.oauth.credentials import digest
from app.oauth.models import OAuthClient, OAuthToken
from app.portability.models import ErasedCredential

log = logging.getLogger(__name__)

USER_COLUMNS = ("user_id", "owner_id", "local_user_id")


@dataclass(frozen=True)
class Erased:
    user_id: str
    rows: int
    vectors: int
    coordination: int

    def as_json(self) -> dict[str, object]:
        return {"deleted": self.user_id, "rows": self.rows, "vectors": self.vectors, "coordination": self.coordination}


def user_tables() -> list[tuple[Table, str]]:
    """Every table holding rows of a user, with the column naming it; children before parents."""
    load_all_models()
    found: list[tuple[Table, str]] = []
    for table in reversed(Base.metadata.sorted_tables):
        for column in USER_COLUMNS:
            if column in table.c:
                found.append((table, column))
    return found


async def delete_account(
    db: Database,
    engine: MemoryEngine | None,
    coordination: Coordination | None,
    user_id: str,
    announce: Callable[[set[str]], Awaitable[None]] | None = None,
) -> Erased:
    """Erase ``user_id``: NotFound when there is no such user. ``engine`` None: the caller's index follows later
    (``engram reindex`` or a server's repair at start), ``coordination`` None: nothing is kept outside the database.
    ``announce`` (``Revocations.announce``) ends the user's open streams in this process (and, through Redis, in the
    others) at once; the revocation row written with the deletion tells every server that polls the database, under
    the account's mark rather than its id (``revocations.note_erased``)."""
    async with db.session() as session:
        if await session.get(User, user_id) is None:
            raise NotFound(f"no user {user_id}")
        memory_ids = list(
            (await session.execute(select(MemoryRecord.id).where(MemoryRecord.user_id == user_id))).scalars()
        )
        await _remember_credentials(session, user_id)
        rows = await _delete_rows(session, user_id)
        note_erased(session, user_id)
    if announce is not None:
        try:
            await announce({user_id})
        except Exception:
            log.warning("could not announce a deleted account to its open streams", exc_info=True)
    vectors = 0
    if engine is not None:
        stray = await engine.ids(user_id=user_id)
        doomed = sorted(set(memory_ids) | stray)
        await engine.purge(doomed)
        vectors = len(doomed)
    erased_coordination = 0
    if coordination is not None:
        try:
            erased_coordination = await coordination.erase_user(user_id)
        except Exception:
            # Claims and presence expire by themselves; the account itself is gone already.
            log.warning("could not erase the coordination state of a deleted account", exc_info=True)
    return Erased(user_id, rows, vectors, erased_coordination)


async def _remember_credentials(session: AsyncSession, user_id: str) -> None:
    tokens = await session.execute(
        select(OAuthToken.access_hash, OAuthToken.refresh_hash).where(OAuthToken.user_id == user_id)
    )
    digests: set[str] = set()
    for access_hash, refresh_hash in tokens.all():
        digests.add(access_hash)
        if refresh_hash:
            digests.add(refresh_hash)
    for client_id in (await session.execute(select(OAuthClient.id).where(_clients_of(user_id)))).scalars():
        digests.add(digest(client_id))
    held = set(
        (await session.execute(select(ErasedCredential.digest).where(ErasedCredential.digest.in_(digests)))).scalars()
    )
    fresh = sorted(digests - held)
    if fresh:
        now = utcnow()
        await session.execute(insert(ErasedCredential), [{"digest": d, "erased_at": now} for d in fresh])


def _clients_of(user_id: str) -> ColumnElement[bool]:
    keys = select(ApiKey.id).where(ApiKey.user_id == user_id)
    return or_(OAuthClient.owner_id == user_id, OAuthClient.registered_with_key.in_(keys))


async def _delete_rows(session: AsyncSession, user_id: str) -> int:
    total = 0
    # Clients registered with the user's keys name no user; they go before the keys that find them.
    result = await session.execute(delete(OAuthClient).where(_clients_of(user_id)))
    total += int(getattr(result, "rowcount", 0) or 0)
    for table, column in user_tables():
        result = await session.execute(delete(table).where(table.c[column] == user_id))
        total += int(getattr(result, "rowcount", 0) or 0)
    result = await session.execute(delete(User).where(User.id == user_id))
    total += int(getattr(result, "rowcount", 0) or 0)
    return total


async def is_erased(db: Database, credential: str) -> bool:
    """Whether ``credential`` (a presented token or client id) belonged to a deleted account."""
    async with db.session() as session:
        found = await session.get(ErasedCredential, digest(credential))
    return found is not None


# What the token endpoint's error_description starts with for a deleted account's credentials (the node stops).
ACCOUNT_DELETED = "account_deleted"


def basic_client_id(headers: Mapping[str, str]) -> str | None:
    """The client id of ``Authorization: Basic`` (RFC 6749 section 2.3.1), or None."""
    scheme, _, value = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except ValueError:
        return None
    return unquote(decoded.partition(":")[0]) or None
