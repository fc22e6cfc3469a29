"""Following the change log: each embedded index applies what other instances (or processes) wrote.

Two servers sharing one PostgreSQL database but each with its own embedded index would otherwise drift apart: a
memory added through one would be listed through the other but never found by its search. The database is the
record; every write appends to the log with the id of the index it went into (``writer``), and each instance
applies to its own index the rows another writer made, from the position it keeps beside its index. The same
watch wakes long-polling pulls on this instance for changes committed by the others.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
from sqlalchemy import select

from app.db import Database
from app.memories.engine import MemoryEngine
from app.memories.models import MemoryRecord
from app.memories.records import with_context
from app.sync.changelog import ChangeFeed, head
from app.sync.models import MemoryChange

log = logging.getLogger(__name__)

STATE_FILE = "index-follower.json"
EMBEDDED_BACKENDS = ("qdrant-edge", "qdrant-local")
PAGE = 500
# The position is kept beside the index at most this often for this instance's own rows (they are skipped, so
# reading them again after a restart costs nothing); at once after applying others'.
SAVE_EVERY_SECONDS = 5.0


def _read_state(path: Path) -> dict[str, object]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def index_writer(data_dir: Path, backend: str) -> str:
    """The id of this process's index in the log: kept beside an embedded index; one for a shared Qdrant server."""
    if backend not in EMBEDDED_BACKENDS:
        return "shared-index"
    path = data_dir / STATE_FILE
    writer = _read_state(path).get("writer")
    if isinstance(writer, str) and writer:
        return writer
    writer = "w_" + secrets.token_hex(8)
    _write_state(path, writer, None)
    return writer


def _write_state(path: Path, writer: str, seq: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"writer": writer, "seq": seq}))
    os.replace(temporary, path)


class LogFollower:
    """Applies other writers' log rows to this instance's embedded index (``engine`` None or a shared index: only
    wakes this instance's waiters)."""

    def __init__(
        self,
        db: Database,
        engine: MemoryEngine | None,
        writer: str,
        feed: ChangeFeed,
        guard: Callable[[Iterable[str]], AbstractAsyncContextManager[None]],
        *,
        state_path: Path | None,
        interval: float = 0.25,
    ) -> None:
        self.db = db
        self.engine = engine if engine is not None and engine.backend in EMBEDDED_BACKENDS else None
        self.writer = writer
        self.feed = feed
        self.guard = guard
        self.state_path = state_path if self.engine is not None else None
        self.interval = interval
        self.seq: int | None = None
        self._saved = 0.0

    async def start(self) -> None:
        """Where to follow from: the position kept beside the index, else the log's head now (start-up repair
        brings the index up to the database as it is)."""
        if self.state_path is not None:
            kept = _read_state(self.state_path).get("seq")
            if isinstance(kept, int):
                self.seq = kept
                return
        async with self.db.session() as session:
            self.seq = await head(session)
        self._save()

    async def run(self) -> None:
        if self.seq is None:
            await self.start()
        commits = self.db.commits.watch()  # nothing committed since the last look: nothing to read
        while True:
            try:
                if commits.moved():
                    while await self.step() == PAGE:
                        pass
                    commits.seen()
            except Exception:
                log.exception("following the change log failed; retrying")
            await anyio.sleep(self.interval)

    async def step(self) -> int:
        """Apply the next page of the log; the number of rows read."""
        assert self.seq is not None
        async with self.db.session() as session:
            query = (
                select(MemoryChange.seq, MemoryChange.memory_id, MemoryChange.writer)
                .where(MemoryChange.seq > self.seq)
                .order_by(MemoryChange.seq)
                .limit(PAGE)
            )
            rows = (await session.execute(query)).all()
        if not rows:
            return 0
        foreign = list(dict.fromkeys(r.memory_id for r in rows if r.writer != self.writer))
        if self.engine is not None and foreign:
            await self._apply(foreign)
        self.seq = rows[-1].seq
        if foreign or time.monotonic() - self._saved > SAVE_EVERY_SECONDS:
            self._save()
        if foreign:
            self.feed.notify()
        return len(rows)

    async def _apply(self, ids: list[str]) -> None:
        """Make the index hold each memory as the database has it now.

        Held (``ChangeLog.guard``) from the read to the index write, so that a write of this instance to the same
        memory lands either before the read or after the index write, never in between. An index already in step
        is left alone, and a change that keeps the content reuses the vector the index has."""
        assert self.engine is not None
        async with self.guard(ids):
            async with self.db.session() as session:
                # Index maintenance across tenants, like repair: every id comes from our own log.
                found = await session.execute(select(MemoryRecord).where(MemoryRecord.id.in_(ids)))
                live = await with_context(session, [r for r in found.scalars() if r.deleted_at is None])
            indexed = await self.engine.vectors(ids)
            stale = [m for m in live if m.id not in indexed or indexed[m.id][0] != m]
            if stale:
                same = {
                    m.id: indexed[m.id][1] for m in stale if m.id in indexed and indexed[m.id][0].content == m.content
                }
                await self.engine.upsert(stale, vectors=same)
            gone = [mid for mid in ids if mid in indexed and mid not in {m.id for m in live}]
            if gone:
                await self.engine.purge(gone)

    def _save(self) -> None:
        self._saved = time.monotonic()
        if self.state_path is not None:
            with contextlib.suppress(OSError):
                _write_state(self.state_path, self.writer, self.seq)
