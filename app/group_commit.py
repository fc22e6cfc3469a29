"""Group commit on SQLite: the writes that arrive together are committed together, through one writer.

SQLite lets one transaction write at a time and makes every commit wait for the disk (``synchronous=FULL``). Writers
that each open their own transaction queue on the database's lock in its busy handler, which sleeps in steps of up
to 100 ms: under load an add waited seconds for a lock held for a millisecond. Here each write is a function of a
session, queued; one writer task takes everything queued, runs each in a savepoint of one transaction (so a write
that fails rolls back alone and its caller gets its own error), commits once and answers them all. A lone write
commits at once, as before: nothing waits on purpose to gather a group.

The works are synchronous and the whole group runs in one trip to a worker thread, on a synchronous engine over the
same file. Through aiosqlite every statement, the savepoints, the commit and the pool's reset were each a trip to its
connection's thread and back: an add's transaction took 6.2-6.5 ms of which SQLite's own work (fsync included) is
about 0.5.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from app.admission.probe import NoProbe, StageProbe
from app.errors import Conflict

log = logging.getLogger(__name__)

T = TypeVar("T")
STAGE = "db_writer"
# A write: synchronous ORM or Core statements on the session it is given, which the caller of ``write`` commits.
Work = Callable[[Session], T]
# In ``session.info`` while the group's transaction holds SQLite's write lock (BEGIN IMMEDIATE).
_WRITE_LOCKED = "engram.write_locked"


def holds_write_lock(session: Session | AsyncSession) -> bool:
    """Whether ``session`` is a group commit's, whose transaction holds the database's write lock from its start: no
    other writer can come between its reads and its writes."""
    return bool(session.info.get(_WRITE_LOCKED))


@dataclass(eq=False)
class _Write(Generic[T]):
    work: Work[T]
    done: asyncio.Future[T]
    queued_at: float


def stale_write() -> Conflict:
    """A versioned row (a memory) changed between a transaction's read and its write."""
    return Conflict("the memory was changed by another request at the same time; retry")


class GroupCommit:
    """``write(work)`` runs ``work(session)`` in the next group and returns its result once the group committed."""

    def __init__(
        self,
        sessionmaker: sessionmaker[Session],
        after_commit: Callable[[dict[str, Any]], Awaitable[None]],
        *,
        max_group: int = 64,
        probe: StageProbe | None = None,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.after_commit = after_commit
        self.max_group = max_group
        self.probe: StageProbe = probe or NoProbe()
        self._queue: list[_Write[Any]] = []
        self._writer: asyncio.Task[None] | None = None

    async def write(self, work: Work[T]) -> T:
        loop = asyncio.get_running_loop()
        item: _Write[T] = _Write(work, loop.create_future(), time.perf_counter())
        self._queue.append(item)
        self.probe.depth(STAGE, len(self._queue))
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._drain())
        try:
            return await asyncio.shield(item.done)
        except asyncio.CancelledError:
            # The write is in a group already and cannot be taken back: its outcome is what stands.
            await asyncio.wait([item.done])
            if item.done.exception() is not None:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return item.done.result()

    async def _drain(self) -> None:
        while self._queue:
            group, self._queue = self._queue[: self.max_group], self._queue[self.max_group :]
            self.probe.depth(STAGE, len(self._queue))
            await self._commit(group)

    async def _commit(self, group: list[_Write[Any]]) -> None:
        started = time.perf_counter()
        for item in group:
            self.probe.waited(STAGE, started - item.queued_at)
        self.probe.batch(STAGE, len(group))
        try:
            results, info = await asyncio.to_thread(self._run, group)
        except BaseException as exc:
            for item in group:
                if not item.done.done():
                    item.done.set_exception(exc if isinstance(exc, Exception) else RuntimeError("write aborted"))
            if not isinstance(exc, Exception):
                raise
            return
        try:
            await self.after_commit(info)
        except Exception:
            log.exception("an after-commit hook failed")
        for item, value, error in results:
            if item.done.done():
                continue
            if error is not None:
                item.done.set_exception(error)
            else:
                item.done.set_result(value)

    def _run(self, group: list[_Write[Any]]) -> tuple[list[tuple[_Write[Any], Any, Exception | None]], dict[str, Any]]:
        """On the worker thread: the group's transaction, each work's outcome, and the session's ``info``."""
        results: list[tuple[_Write[Any], Any, Exception | None]] = []
        with self.sessionmaker() as session:
            # Take the write lock now: the first savepoint would otherwise open the transaction itself, and
            # releasing it would commit (pysqlite only begins before DML).
            session.execute(text("BEGIN IMMEDIATE"))
            session.info[_WRITE_LOCKED] = True
            # Alone, a write needs no savepoint: if it fails, the whole transaction rolls back (two statements
            # fewer for a lone write).
            alone = len(group) == 1
            for item in group:
                try:
                    with contextlib.nullcontext() if alone else session.begin_nested():
                        value = item.work(session)
                except StaleDataError as exc:
                    conflict = stale_write()
                    conflict.__cause__ = exc
                    results.append((item, None, conflict))
                except Exception as exc:
                    results.append((item, None, exc))
                else:
                    results.append((item, value, None))
            if alone and results[0][2] is not None:
                session.rollback()
            else:
                session.commit()
            info = dict(session.info)
            info.pop(_WRITE_LOCKED, None)
        return results, info
