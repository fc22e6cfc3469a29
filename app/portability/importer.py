"""Bringing an ``engram-export`` into an existing account: idempotent, memory ids kept, vectors reused or re-embedded.

Every line is read and checked before anything is written: a line that is not a record of the format refuses the
whole import, naming the line (``MalformedLine``). Records that are well formed are then imported, skipped (already
here: the same memory id in this account, the same document path, agent, task or message) or refused one by one
with the reason (a memory id another account holds, content over this server's limit, the plan's quota). Memories
are written like any local write: the change log gets them, so edge sync pushes them and other instances index them.
A memory this account deleted since the export is restored (an import is how a backup is put back), with an ADD in
its history, as edge sync records a deleted memory written again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import Database, utcnow
from app.errors import AppError, QuotaExceeded
from app.identity import Identity, validate_name
from app.memories.engine import MemoryEngine
from app.memories.events import history_event
from app.memories.models import MemoryEvent, MemoryRecord
from app.memories.points import is_uuid
from app.memories.records import with_context
from app.memories.scopes import PRIVATE_PREFIX, visibility_key
from app.portability import session_records
from app.portability.format import (
    AgentLine,
    DocumentLine,
    Event,
    Header,
    MalformedLine,
    MemoryLine,
    MessageLine,
    Record,
    TaskLine,
    parse_header,
    parse_record,
    unpack_vector,
)
from app.quotas.service import Quotas
from app.sync.changelog import ChangeLog
from app.sync.history import CONFLICT
from app.text import check_metadata, check_text

# Memories written (and embedded) per transaction.
BATCH = 200
# What a restored memory takes from the file; its id, owner and history stay the row's.
RESTORED_FIELDS = (
    "session",
    "agent",
    "scope",
    "visibility",
    "role",
    "end_user",
    "content",
    "tags",
    "metadata_",
    "created_at",
)
# Refusals listed in the summary; the count covers them all.
MAX_REASONS = 100

Progress = Callable[[int, int], None]


@dataclass
class Summary:
    imported: int = 0
    skipped: int = 0
    refused: int = 0
    reasons: list[dict[str, Any]] = field(default_factory=list)

    def refuse(self, line: int, reason: str) -> None:
        self.refused += 1
        if len(self.reasons) < MAX_REASONS:
            self.reasons.append({"line": line, "reason": reason})

    def as_json(self) -> dict[str, Any]:
        return {"imported": self.imported, "skipped": self.skipped, "refused": self.refused, "reasons": self.reasons}


@dataclass(frozen=True)
class Parsed:
    header: Header
    records: list[tuple[int, Record]]


def parse(lines: Iterable[str]) -> Parsed:
    """Every line checked, in order; blank lines are allowed anywhere after the header."""
    header: Header | None = None
    records: list[tuple[int, Record]] = []
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if header is None:
            if not text:
                raise MalformedLine("line 1: empty; an export starts with its header line", line=1)
            header = parse_header(text)
            continue
        if text:
            records.append((number, parse_record(number, text)))
    if header is None:
        raise MalformedLine("the file is empty; an export starts with its header line", line=1)
    return Parsed(header, records)


def split_body(body: bytes) -> list[str]:
    """The lines of an HTTP body (UTF-8)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        raise MalformedLine(f"line {line}: not UTF-8", line=line) from None
    return text.split("\n")


class Importer:
    """Imports parsed exports into one account. ``engine`` is the index the memories go into."""

    def __init__(
        self,
        db: Database,
        engine: MemoryEngine,
        *,
        changes: ChangeLog | None,
        quotas: Quotas | None,
        max_memory_chars: int,
        dims: int,
        max_conflicts: int,
    ) -> None:
        """``max_conflicts``: the most CONFLICT events a memory keeps (``sync_max_conflicts_per_memory``), as when
        edge sync records losing versions: an import brings a memory's newest that many, so that a file cannot
        grow a memory's history past what sync lets it hold."""
        self.dims = dims
        self.max_conflicts = max_conflicts
        self.db = db
        self.engine = engine
        self.changes = changes
        self.quotas = quotas
        self.max_memory_chars = max_memory_chars

    async def run(self, user_id: str, parsed: Parsed, progress: Progress | None = None) -> Summary:
        """Import every record of ``parsed`` into ``user_id``; ``progress(done, total)`` after each step."""
        summary = Summary()
        total = len(parsed.records)
        done = 0

        def step(n: int) -> None:
            nonlocal done
            done += n
            if progress is not None:
                progress(done, total)

        by_type: dict[type, list[tuple[int, Any]]] = {}
        for number, record in parsed.records:
            by_type.setdefault(type(record), []).append((number, record))
        memories = by_type.get(MemoryLine, [])
        vectors_usable = parsed.header.vectors and parsed.header.model == self.engine.model_id
        dims = parsed.header.dims or 0
        seen: set[str] = set()
        for start in range(0, len(memories), BATCH):
            chunk = memories[start : start + BATCH]
            await self._memories(user_id, chunk, seen, vectors_usable, dims, summary)
            step(len(chunk))
        for kind, write in (
            (DocumentLine, session_records.import_documents),
            (AgentLine, session_records.import_agents),
            (MessageLine, session_records.import_messages),
            (TaskLine, session_records.import_tasks),
        ):
            items = by_type.get(kind, [])
            if items:
                await write(self.db, user_id, items, summary)
                step(len(items))
        return summary

    # --- memories -------------------------------------------------------------------------------------------------

    def _check(self, user_id: str, line: MemoryLine) -> MemoryRecord:
        """The record to insert; AppError says why this line is refused."""
        if not is_uuid(line.id):
            raise AppError(f"memory id {line.id!r} is not a UUID")
        check_text(line.content, "content")
        if not line.content.strip():
            raise AppError("content is empty")
        if len(line.content) > self.max_memory_chars:
            raise AppError(f"memory is {len(line.content)} characters; this server's limit is {self.max_memory_chars}")
        for tag in line.tags:
            check_text(tag, "tags")
        check_metadata(line.metadata)
        if line.end_user is not None:
            check_text(line.end_user, "end_user")
        session = validate_name(line.session, "session") if line.session is not None else None
        agent = validate_name(line.agent, "agent") if line.agent is not None else None
        role = validate_name(line.role, "role") if line.role is not None else None
        key = line.visibility_key
        if key is None or key.startswith(PRIVATE_PREFIX) != (line.visibility == "private"):
            key = visibility_key(line.scope, Identity(user_id, session, agent), role=role, visibility=line.visibility)
        return MemoryRecord(
            id=line.id.lower(),
            user_id=user_id,
            session=session,
            agent=agent,
            scope=line.scope,
            visibility=key,
            role=role,
            end_user=line.end_user,
            content=line.content,
            tags=list(line.tags),
            metadata_=dict(line.metadata),
            created_at=line.created_at,
            updated_at=line.updated_at,
        )

    async def _memories(
        self,
        user_id: str,
        chunk: Sequence[tuple[int, MemoryLine]],
        seen: set[str],
        vectors_usable: bool,
        dims: int,
        summary: Summary,
    ) -> None:
        wanted: list[tuple[int, MemoryLine, MemoryRecord]] = []
        for number, line in chunk:
            try:
                record = self._check(user_id, line)
            except AppError as exc:
                summary.refuse(number, f"memory {line.id}: {exc.message}")
                continue
            if record.id in seen:
                summary.skipped += 1
                continue
            seen.add(record.id)
            wanted.append((number, line, record))
        if not wanted:
            return
        ids = [r.id for _, _, r in wanted]
        guard = self.changes.guard(ids) if self.changes is not None else _nothing()
        async with guard:
            async with self.db.session() as session:
                held = {
                    memory_id: (owner, deleted_at is not None)
                    for memory_id, owner, deleted_at in (
                        await session.execute(
                            select(MemoryRecord.id, MemoryRecord.user_id, MemoryRecord.deleted_at).where(
                                MemoryRecord.id.in_(ids)
                            )
                        )
                    ).all()
                }
            new: list[tuple[int, MemoryLine, MemoryRecord]] = []
            deleted: list[tuple[int, MemoryLine, MemoryRecord]] = []
            for number, line, record in wanted:
                owner, gone = held.get(record.id, (None, False))
                if owner is None:
                    new.append((number, line, record))
                elif owner != user_id:
                    summary.refuse(number, f"memory {record.id}: this id belongs to another account on this server")
                elif gone:
                    deleted.append((number, line, record))
                else:
                    summary.skipped += 1
            written = 0
            for lines, write in ((new, self._write), (deleted, self._restore)):
                if not lines:
                    continue
                try:
                    written += await write(user_id, lines, vectors_usable, dims)
                except QuotaExceeded as exc:
                    for number, _, record in lines:
                        summary.refuse(number, f"memory {record.id}: {exc.message}")
        if written and self.changes is not None:
            self.changes.committed()
        summary.imported += written

    def _vectors(
        self, lines: Sequence[tuple[int, MemoryLine, MemoryRecord]], vectors_usable: bool, dims: int
    ) -> dict[str, list[float]]:
        """The file's vectors by memory id, where they are this server's model's."""
        vectors: dict[str, list[float]] = {}
        if vectors_usable and dims == self.dims:
            for _, line, record in lines:
                vector = unpack_vector(line.vector, dims) if line.vector else None
                if vector is not None:
                    vectors[record.id] = vector
        return vectors

    async def _write(
        self, user_id: str, new: Sequence[tuple[int, MemoryLine, MemoryRecord]], vectors_usable: bool, dims: int
    ) -> int:
        records = [r for _, _, r in new]

        async def insert(session: AsyncSession) -> list[MemoryRecord]:
            if self.changes is not None:
                self.changes.stamp(records)
            session.add_all(records)
            await session.flush()
            await _insert_history(session, user_id, new, self.max_conflicts)
            return records

        return await self._commit(user_id, len(records), self._vectors(new, vectors_usable, dims), insert)

    async def _restore(
        self, user_id: str, lines: Sequence[tuple[int, MemoryLine, MemoryRecord]], vectors_usable: bool, dims: int
    ) -> int:
        """Bring back memories this account deleted, as the file holds them; the rows (and their history) stay."""

        async def bring_back(session: AsyncSession) -> list[MemoryRecord]:
            rows = {
                row.id: row
                for row in (
                    await session.execute(
                        select(MemoryRecord).where(
                            MemoryRecord.id.in_([r.id for _, _, r in lines]),
                            MemoryRecord.user_id == user_id,
                            MemoryRecord.deleted_at.is_not(None),
                        )
                    )
                ).scalars()
            }
            now = utcnow()
            restored: list[MemoryRecord] = []
            for _, _, wanted in lines:
                row = rows.get(wanted.id)
                if row is None:
                    continue  # restored (or written) by someone else since it was read
                for name in RESTORED_FIELDS:
                    setattr(row, name, getattr(wanted, name))
                row.updated_at = now
                row.deleted_at = None
                restored.append(row)
            if self.changes is not None:
                self.changes.stamp(restored)
            session.add_all(
                history_event(row, "ADD", f"{user_id} via import", detail="restored from an export") for row in restored
            )
            return restored

        return await self._commit(user_id, len(lines), self._vectors(lines, vectors_usable, dims), bring_back)

    async def _commit(
        self,
        user_id: str,
        adding: int,
        vectors: dict[str, list[float]],
        prepare: Callable[[AsyncSession], Awaitable[list[MemoryRecord]]],
    ) -> int:
        """One transaction: reserve ``adding`` memories of the quota, ``prepare`` the rows, index them and log them
        for edge sync. If it fails after indexing, the index points go again. Returns how many rows it wrote."""
        indexed: list[MemoryRecord] = []
        try:
            async with self.db.session() as session:
                if self.quotas is not None:
                    await self.quotas.reserve_memories(session, user_id, adding)
                records = await prepare(session)
                await session.flush()
                indexed = records
                await self.engine.upsert(await with_context(session, records), vectors)
                if self.changes is not None:
                    await self.changes.append(session, records, "upsert")
        except BaseException:
            if indexed:
                await asyncio.shield(self.engine.purge([r.id for r in indexed]))
            raise
        return len(records)


async def _insert_history(
    session: AsyncSession, user_id: str, new: Sequence[tuple[int, MemoryLine, MemoryRecord]], max_conflicts: int
) -> None:
    rows = [
        {
            "memory_id": record.id,
            "user_id": user_id,
            "event": e.event,
            "old_content": e.old_content,
            "new_content": e.new_content,
            "actor": e.actor,
            "detail": e.detail,
            "created_at": e.created_at,
        }
        for _, line, record in new
        for e in _bounded(line.history, max_conflicts)
    ]
    if rows:
        await (await session.connection()).execute(insert(cast(Table, MemoryEvent.__table__)), rows)


def _bounded(history: Sequence[Event], max_conflicts: int) -> list[Event]:
    """``history`` with only its newest ``max_conflicts`` CONFLICT events, in the file's order."""
    conflicts = sorted((e for e in history if e.event == CONFLICT), key=lambda e: e.created_at)
    dropped = {id(e) for e in conflicts[: max(0, len(conflicts) - max_conflicts)]}
    return [e for e in history if id(e) not in dropped]


class _nothing:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None
