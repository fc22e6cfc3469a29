"""Writing one account (or one of its sessions) as ``engram-export`` lines (see ``app.portability.format``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from typing import Any

from sqlalchemy import select, tuple_

from app.db import Database, utcnow
from app.memories.engine import MemoryEngine
from app.memories.models import MemoryEvent, MemoryRecord
from app.memories.scopes import visibility_of
from app.portability.format import FORMAT, VERSION, dump, pack_vector
from app.projects.models import Document
from app.teams.models import MessageRead, SessionAgent, SessionMessage, SessionTask, TaskDependency

# Memories read (and their vectors fetched) per round: bounded memory whatever the account's size.
PAGE = 500


async def export_lines(
    db: Database,
    user_id: str,
    *,
    model: str,
    dims: int,
    session: str | None = None,
    engine: MemoryEngine | None = None,
) -> AsyncIterator[str]:
    """The header, then every record of ``user_id`` (of ``session`` only, when given), one line each, no newline.

    With ``engine``, memory lines carry their dense vector from the index (the model is ``model``)."""
    header = {
        "format": FORMAT,
        "version": VERSION,
        "model": model,
        "dims": dims,
        "user_id": user_id,
        "session": session,
        "vectors": engine is not None,
        "exported_at": utcnow(),
    }
    yield dump(header)
    async for line in _memories(db, user_id, session, engine):
        yield line
    async with db.session() as s:
        for line in await _documents(s, user_id, session):
            yield line
        for line in await _agents(s, user_id, session):
            yield line
        for line in await _messages(s, user_id, session):
            yield line
        for line in await _tasks(s, user_id, session):
            yield line


async def _memories(db: Database, user_id: str, session: str | None, engine: MemoryEngine | None) -> AsyncIterator[str]:
    after: tuple[Any, str] | None = None
    while True:
        query = select(MemoryRecord).where(MemoryRecord.user_id == user_id, MemoryRecord.deleted_at.is_(None))
        if session is not None:
            query = query.where(MemoryRecord.session == session)
        if after is not None:
            query = query.where(tuple_(MemoryRecord.created_at, MemoryRecord.id) > tuple_(*after))
        query = query.order_by(MemoryRecord.created_at, MemoryRecord.id).limit(PAGE)
        async with db.session() as s:
            records = list((await s.execute(query)).scalars())
            if not records:
                return
            history = await _history(s, user_id, [r.id for r in records])
        vectors = await engine.packed_vectors([r.id for r in records]) if engine is not None else {}
        for record in records:
            line = memory_line(record, history.get(record.id, []))
            held = vectors.get(record.id)
            if held is not None and held[0] == record.content:  # a vector of older content is no vector of this one
                line["vector"] = pack_vector(held[1])
            yield dump(line)
        after = (records[-1].created_at, records[-1].id)


def memory_line(record: MemoryRecord, history: Sequence[MemoryEvent]) -> dict[str, Any]:
    return {
        "type": "memory",
        "id": record.id,
        "content": record.content,
        "scope": record.scope,
        "visibility": visibility_of(record.visibility),
        "visibility_key": record.visibility,
        "session": record.session,
        "agent": record.agent,
        "role": record.role,
        "end_user": record.end_user,
        "tags": list(record.tags or []),
        "metadata": dict(record.metadata_ or {}),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "history": [
            {
                "event": e.event,
                "old_content": e.old_content,
                "new_content": e.new_content,
                "actor": e.actor,
                "detail": e.detail,
                "created_at": e.created_at,
            }
            for e in history
        ],
    }


async def _history(s: Any, user_id: str, ids: Sequence[str]) -> dict[str, list[MemoryEvent]]:
    rows = await s.execute(
        select(MemoryEvent)
        .where(MemoryEvent.user_id == user_id, MemoryEvent.memory_id.in_(ids))
        .order_by(MemoryEvent.id)
    )
    found: dict[str, list[MemoryEvent]] = defaultdict(list)
    for event in rows.scalars():
        found[event.memory_id].append(event)
    return found


async def _documents(s: Any, user_id: str, session: str | None) -> list[str]:
    query = select(Document).where(Document.user_id == user_id)
    if session is not None:
        query = query.where(Document.session == session)
    rows = (await s.execute(query.order_by(Document.session, Document.path))).scalars()
    return [
        dump(
            {
                "type": "document",
                "session": d.session,
                "path": d.path,
                "origin": d.origin,
                "content_hash": d.content_hash,
                "size": d.size,
                "modified_at": d.modified_at,
                "chunks": d.chunks,
                "chunking": d.chunking,
                "memory_ids": list(d.memory_ids or []),
                "indexed_at": d.indexed_at,
            }
        )
        for d in rows
    ]


async def _agents(s: Any, user_id: str, session: str | None) -> list[str]:
    query = select(SessionAgent).where(SessionAgent.user_id == user_id)
    if session is not None:
        query = query.where(SessionAgent.session == session)
    rows = (await s.execute(query.order_by(SessionAgent.session, SessionAgent.agent))).scalars()
    return [
        dump(
            {
                "type": "agent",
                "session": a.session,
                "agent": a.agent,
                "role": a.role,
                "capabilities": list(a.capabilities or []),
                "client": a.client,
                "joined_at": a.joined_at,
                "left_at": a.left_at,
                "first_seen_at": a.first_seen_at,
                "last_seen_at": a.last_seen_at,
            }
        )
        for a in rows
    ]


async def _messages(s: Any, user_id: str, session: str | None) -> list[str]:
    query = select(SessionMessage).where(SessionMessage.user_id == user_id)
    reads_query = select(MessageRead.message_id, MessageRead.agent).where(MessageRead.user_id == user_id)
    if session is not None:
        query = query.where(SessionMessage.session == session)
        reads_query = reads_query.where(MessageRead.session == session)
    read_by: dict[int, list[str]] = defaultdict(list)
    for message_id, agent in (await s.execute(reads_query.order_by(MessageRead.agent))).all():
        read_by[message_id].append(agent)
    rows = (await s.execute(query.order_by(SessionMessage.id))).scalars()
    return [
        dump(
            {
                "type": "message",
                "id": m.id,
                "session": m.session,
                "sender": m.sender,
                "recipient": m.recipient,
                "kind": m.kind,
                "content": m.content,
                "attachments": list(m.attachments or []),
                "reply_to": m.reply_to,
                "created_at": m.created_at,
                "read_by": read_by.get(m.id, []),
            }
        )
        for m in rows
    ]


async def _tasks(s: Any, user_id: str, session: str | None) -> list[str]:
    query = select(SessionTask).where(SessionTask.user_id == user_id)
    deps_query = select(TaskDependency).where(TaskDependency.user_id == user_id)
    if session is not None:
        query = query.where(SessionTask.session == session)
        deps_query = deps_query.where(TaskDependency.session == session)
    deps: dict[tuple[str, str], list[str]] = defaultdict(list)
    for dep in (await s.execute(deps_query.order_by(TaskDependency.depends_on))).scalars():
        deps[(dep.session, dep.task_id)].append(dep.depends_on)
    rows = (await s.execute(query.order_by(SessionTask.session, SessionTask.position))).scalars()
    return [
        dump(
            {
                "type": "task",
                "session": t.session,
                "task_id": t.task_id,
                "position": t.position,
                "description": t.description,
                "files": list(t.files or []),
                "status": t.status,
                "assignee": t.assignee,
                "result": t.result,
                "files_modified": list(t.files_modified or []),
                "created_by": t.created_by,
                "created_at": t.created_at,
                "claimed_at": t.claimed_at,
                "completed_at": t.completed_at,
                "deps": deps.get((t.session, t.task_id), []),
            }
        )
        for t in rows
    ]
