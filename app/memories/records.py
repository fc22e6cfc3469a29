"""How a memory record is shown and indexed: the API's view of it, the index's (with the neighbour context), and the
list cursor that points at it."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import ValidationFailed
from app.memories import repository
from app.memories.models import MemoryRecord, StoredMemory
from app.memories.points import IndexedMemory
from app.memories.schemas import MemoryOut, source_of
from app.memories.scopes import visibility_of

# A memory is indexed with the one written just before it in the same place, if that is at most this much older:
# memories written in one stretch are one conversation, and a reply is found by the words of what it answers.
CONTEXT_WINDOW = timedelta(minutes=30)


def to_out(record: MemoryRecord) -> MemoryOut:
    return MemoryOut(
        id=record.id,
        content=record.content,
        scope=record.scope,
        visibility=visibility_of(record.visibility),
        role=record.role,
        tags=list(record.tags or []),
        metadata=dict(record.metadata_ or {}),
        session=record.session,
        agent=record.agent,
        end_user=record.end_user,
        created_at=record.created_at,
        updated_at=record.updated_at,
        source=source_of(record.metadata_),
    )


def to_indexed(record: StoredMemory, context: str | None = None) -> IndexedMemory:
    return IndexedMemory(
        id=record.id,
        user_id=record.user_id,
        visibility=record.visibility,
        scope=record.scope,
        session=record.session,
        agent=record.agent,
        content=record.content,
        tags=list(record.tags or []),
        metadata=dict(record.metadata_ or {}),
        created_at=record.created_at.isoformat(),
        context=context or "",
        end_user=record.end_user,
        updated_at=record.updated_at.isoformat() if record.updated_at else "",
    )


async def with_context(session: AsyncSession, records: Sequence[StoredMemory]) -> list[IndexedMemory]:
    """Records as the index holds them: each with its neighbour context (see ``lexical``)."""
    contexts = await repository.previous_contents(session, records, within=CONTEXT_WINDOW)
    return [to_indexed(r, contexts.get(r.id)) for r in records]


def encode_cursor(record: MemoryRecord) -> str:
    return base64.urlsafe_b64encode(f"{record.created_at.isoformat()}|{record.id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created, _, memory_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        when = datetime.fromisoformat(created)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise ValidationFailed("cursor is not one this API returned", field="cursor") from exc
    # Every cursor this API returns carries an offset; a naive time cannot be compared with the stored ones.
    if when.tzinfo is None or not memory_id:
        raise ValidationFailed("cursor is not one this API returned", field="cursor")
    return when, memory_id


def index_time(stamp: str) -> datetime | None:
    """An ISO 8601 time from the index payload; None where the index does not say (points from older versions)."""
    try:
        return datetime.fromisoformat(stamp) if stamp else None
    except ValueError:
        return None
