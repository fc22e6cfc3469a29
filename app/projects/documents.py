"""Indexing documents into a session: the one place that turns files into memories and keeps them in step.

Every chunk is a memory of the caller's user in the session, written and deleted through MemoryService, so that
isolation, limits, history and everything else that holds for memories holds for documents. A ``documents`` row per
file records its hash and the ids of its chunks: an unchanged file writes nothing, a changed one replaces exactly
its own chunks, in one all-or-nothing write.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.principal import Principal
from app.db import Database, utcnow
from app.errors import Conflict, NotFound, ValidationFailed
from app.identity import Identity
from app.memories.lexical import DOCUMENT_KIND
from app.memories.schemas import MemoryIn, MemoryOut
from app.memories.service import MemoryService
from app.projects import files, repository
from app.projects.chunking import CHUNKING, Chunk, Unchunkable, chunk_document, kind_of
from app.projects.models import Document
from app.projects.schemas import DocumentIn, DocumentList, DocumentOut, FileResult, IndexReport, Skipped

DOCUMENT_TAG = DOCUMENT_KIND  # the tag and the metadata kind: search and sources know chunks by it
# Concurrent writers of one session's documents (another instance, say) make a write start over; after this many
# tries the caller hears 409.
ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Prepared:
    """A file that passed the rules, ready to chunk."""

    path: str
    text: str
    content_hash: str
    size: int
    modified_at: datetime | None


class _Stale(Exception):
    """The session's documents changed between planning a write and locking for it."""


def to_document_out(doc: Document) -> DocumentOut:
    return DocumentOut(
        path=doc.path,
        content_hash=doc.content_hash,
        size=doc.size,
        chunks=doc.chunks,
        origin=doc.origin,
        modified_at=doc.modified_at,
        indexed_at=doc.indexed_at,
    )


def _session_of(identity: Identity) -> str:
    if identity.session is None:
        raise ValidationFailed("documents are indexed into a session: name one", field="session")
    return identity.session


class DocumentService:
    """Index, remove and list a session's documents on behalf of a principal. Created once."""

    def __init__(self, db: Database, memories: MemoryService, *, max_memory_chars: int, max_document_bytes: int):
        self.db = db
        self.memories = memories
        self.max_memory_chars = max_memory_chars
        self.max_document_bytes = max_document_bytes
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()

    def prepare(self, documents: Sequence[DocumentIn]) -> tuple[list[Prepared], list[Skipped]]:
        """The documents that pass the rules, and a reason for each one that does not."""
        ready: list[Prepared] = []
        refused: list[Skipped] = []
        seen: set[str] = set()
        for document in documents:
            try:
                path = files.clean_path(document.path)
                if path in seen:
                    raise files.Refused(files.INVALID_PATH, f"{path} is given more than once")
                data = files.encode(document.content, self.max_document_bytes)
            except files.Refused as refusal:
                refused.append(Skipped(path=document.path, reason=refusal.reason, message=refusal.message))
                continue
            seen.add(path)
            modified_at = document.modified_at or utcnow()
            ready.append(Prepared(path, document.content, files.content_hash(data), len(data), modified_at))
        return ready, refused

    async def put(
        self, principal: Principal, identity: Identity, documents: Sequence[DocumentIn], *, origin: str
    ) -> IndexReport:
        """Index files into the identity's session, all or none: if any file is refused, nothing is written."""
        principal.require_write()
        _session_of(identity)
        ready, refused = self.prepare(documents)
        if refused:
            raise ValidationFailed(
                "nothing was indexed: " + "; ".join(f"{r.path}: {r.message} ({r.reason})" for r in refused),
                refused=[r.model_dump() for r in refused],
            )
        return await self.apply(principal, identity, put=ready, remove=(), origin=origin)

    async def remove(self, principal: Principal, identity: Identity, paths: Sequence[str]) -> IndexReport:
        """Remove indexed files and every chunk of theirs, all or none; an unknown path removes nothing."""
        principal.require_write()
        session_name = _session_of(identity)
        try:
            cleaned = list(dict.fromkeys(files.clean_path(path) for path in paths))
        except files.Refused as refusal:
            raise ValidationFailed(refusal.message, field="path") from None
        if not cleaned:
            raise ValidationFailed("name at least one path", field="path")
        async with self.db.session() as session:
            existing = await repository.documents(session, principal.user_id, session_name, cleaned)
        missing = [path for path in cleaned if path not in existing]
        if missing:
            raise NotFound(f"no indexed document {', '.join(missing)} in session {session_name}; nothing was removed")
        return await self.apply(principal, identity, put=(), remove=cleaned, origin="upload")

    async def list(self, principal: Principal, identity: Identity) -> DocumentList:
        """The session's indexed files with their hashes and chunk counts, by path."""
        session_name = _session_of(identity)
        async with self.db.session() as session:
            rows = await repository.listing(session, principal.user_id, session_name)
        return DocumentList(session=session_name, documents=[to_document_out(row) for row in rows])

    async def snapshot(self, user_id: str, session_name: str) -> dict[str, Document]:
        """The session's documents by path, as stored (a folder's reconcile compares against these)."""
        async with self.db.session() as session:
            return await repository.documents(session, user_id, session_name)

    async def apply(
        self,
        principal: Principal,
        identity: Identity,
        *,
        put: Sequence[Prepared],
        remove: Sequence[str],
        origin: str,
        skip_refused: bool = False,
    ) -> IndexReport:
        """Write changed files (an unchanged hash writes nothing) and remove others, as one all-or-nothing write.

        A file that cannot be chunked within the memory limit refuses the whole write, or with ``skip_refused`` is
        reported as skipped and loses what it had indexed."""
        started = time.perf_counter()
        session_name = _session_of(identity)
        key = (principal.user_id, session_name)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with lock:
            for _ in range(ATTEMPTS):
                try:
                    report = await self._apply_once(
                        principal, identity, session_name, put, remove, origin, skip_refused
                    )
                    break
                except _Stale:
                    continue
            else:
                raise Conflict(f"the documents of session {session_name} kept changing meanwhile; retry")
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    async def _apply_once(
        self,
        principal: Principal,
        identity: Identity,
        session_name: str,
        put: Sequence[Prepared],
        remove: Sequence[str],
        origin: str,
        skip_refused: bool,
    ) -> IndexReport:
        user_id = principal.user_id
        paths = [file.path for file in put] + [path for path in remove]
        async with self.db.session() as session:
            existing = await repository.documents(session, user_id, session_name, paths)
        report = IndexReport(session=session_name)
        writes: list[tuple[Prepared, list[Chunk]]] = []
        touched: list[Prepared] = []
        old_ids: list[str] = []
        for file in put:
            doc = existing.get(file.path)
            if doc is not None and doc.content_hash == file.content_hash and doc.chunking == CHUNKING:
                report.unchanged += 1
                if doc.size != file.size or (file.modified_at is not None and doc.modified_at != file.modified_at):
                    touched.append(file)
                continue
            try:
                chunks = chunk_document(file.path, file.text, self.max_memory_chars)
            except Unchunkable as exc:
                report.skipped.append(Skipped(path=file.path, reason=files.INVALID_PATH, message=str(exc)))
                continue
            writes.append((file, chunks))
            if doc is not None:
                old_ids.extend(doc.memory_ids)
        if report.skipped and not skip_refused:
            raise ValidationFailed(
                "nothing was indexed: " + "; ".join(f"{r.path}: {r.message} ({r.reason})" for r in report.skipped),
                refused=[r.model_dump() for r in report.skipped],
            )
        unchunkable = [r.path for r in report.skipped if r.path in existing]
        gone = [path for path in [*remove, *unchunkable] if path in existing]
        for path in gone:
            old_ids.extend(existing[path].memory_ids)
        expected = {path: list(doc.memory_ids) for path, doc in existing.items()}

        async def recheck(session: AsyncSession) -> dict[str, Document]:
            await repository.lock_session(session, user_id, session_name)
            current = await repository.documents(session, user_id, session_name, paths)
            if {path: list(doc.memory_ids) for path, doc in current.items()} != expected:
                raise _Stale
            return current

        if not writes and not gone:
            if touched:
                async with self.db.session() as session:
                    current = await recheck(session)
                    for file in touched:
                        current[file.path].size = file.size
                        current[file.path].modified_at = file.modified_at
            return report

        items: list[MemoryIn] = []
        spans: list[tuple[Prepared, int, int]] = []
        for file, chunks in writes:
            start = len(items)
            items.extend(_memory(file, chunk, number, len(chunks)) for number, chunk in enumerate(chunks))
            spans.append((file, start, len(items)))

        async def before(session: AsyncSession) -> None:
            await recheck(session)

        async def after(session: AsyncSession, created: list[MemoryOut]) -> None:
            current = await repository.documents(session, user_id, session_name, paths)
            for file, start, end in spans:
                await repository.save_document(
                    session,
                    current.get(file.path),
                    user_id=user_id,
                    session_name=session_name,
                    path=file.path,
                    origin=origin,
                    content_hash=file.content_hash,
                    size=file.size,
                    modified_at=file.modified_at,
                    memory_ids=[memory.id for memory in created[start:end]],
                    chunking=CHUNKING,
                )
            for file in touched:
                current[file.path].size = file.size
                current[file.path].modified_at = file.modified_at
            await repository.drop_documents(session, user_id, session_name, gone)

        await self.memories.replace(principal, identity, old_ids, items, before=before, after=after)
        for file, start, end in spans:
            status = "changed" if file.path in existing else "added"
            setattr(report, status, getattr(report, status) + 1)
            report.files.append(FileResult(path=file.path, status=status, chunks=end - start))
        for path in gone:
            report.removed += 1
            report.files.append(FileResult(path=path, status="removed", chunks=0))
        report.chunks_written = len(items)
        report.chunks_removed = len(old_ids)
        return report


def _memory(file: Prepared, chunk: Chunk, number: int, count: int) -> MemoryIn:
    return MemoryIn(
        content=chunk.content(file.path),
        tags=[DOCUMENT_TAG, kind_of(file.path)],
        metadata={
            "kind": DOCUMENT_TAG,
            "path": file.path,
            "heading_path": " > ".join(chunk.heading_path),
            "source": chunk.source(file.path),
            "content_hash": file.content_hash,
            "modified_at": file.modified_at.isoformat() if file.modified_at is not None else None,
            "chunk": number,
            "chunks": count,
        },
    )
