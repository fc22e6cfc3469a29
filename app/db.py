"""Database plumbing: the declarative base, the engine, and sessions that commit or roll back as a unit."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Connection,
    DateTime,
    Engine,
    Executable,
    Integer,
    MetaData,
    Row,
    TypeDecorator,
    event,
)
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DataError, DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from app.admission.probe import StageProbe
from app.errors import Overloaded, ValidationFailed
from app.group_commit import GroupCommit, Work, stale_write

log = logging.getLogger(__name__)

T = TypeVar("T")

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both PostgreSQL and SQLite (which drops the offset)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


# An id that may outgrow 32 bits (an event or a message per write, for years), and the columns that name one:
# BIGINT (BIGSERIAL as a key) on PostgreSQL; INTEGER on SQLite, which is 64-bit there and the only type SQLite
# autoincrements as a primary key.
BIG_ID = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON(), list[str]: JSON()}


# SQLSTATEs of values PostgreSQL will not store, and what to tell the caller (SQLite stores them all).
_DATA_PROBLEMS = {
    "22021": "text must not contain NUL characters (U+0000)",
    "22P05": "text must not contain NUL characters (U+0000)",
    "22001": "a value is longer than its field allows",
    "22P02": "a value has a form the database cannot store (NaN or Infinity in JSON, say)",
}


def _sqlstate(exc: DBAPIError) -> str | None:
    # asyncpg's code sits on the adapted error or on the asyncpg exception it wraps.
    for candidate in (exc.orig, getattr(exc.orig, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if code:
            return str(code)
    return None


def bad_value(exc: DBAPIError) -> ValidationFailed | None:
    """A value the database refused (SQLSTATE class 22, data exception), as the caller's mistake it is."""
    sqlstate = _sqlstate(exc)
    if not isinstance(exc, DataError) and not (sqlstate or "").startswith("22"):
        return None
    return ValidationFailed(_DATA_PROBLEMS.get(sqlstate or "", "a value could not be stored"))


@asynccontextmanager
async def refusing_bad_values() -> AsyncIterator[None]:
    """Turn the database's refusal of a value into ``ValidationFailed`` (a 422, never a 500)."""
    try:
        yield
    except DBAPIError as exc:
        if (refused := bad_value(exc)) is not None:
            raise refused from exc
        raise


async def _to_the_end(cleanup: Awaitable[None]) -> None:
    """Run a session's rollback or close to its end even when the task running it is cancelled meanwhile.

    A cancelled task's cleanup can be cancelled again at its next await (anyio cancels a scope at every await
    inside it: a background loop stopped at shutdown). The connection then went back to the pool half reset,
    and the pool logged an error with a traceback. In a task of its own the cleanup finishes; this one still
    hears its cancellation."""
    await asyncio.shield(asyncio.ensure_future(cleanup))


def utcnow() -> datetime:
    return datetime.now(UTC)


# How long a request may wait for a pooled connection before it hears 503: admission lets in no more requests than
# the pool holds connections (``create_engine``), so a wait this long means the database itself is stuck.
POOL_TIMEOUT_SECONDS = 5.0


@asynccontextmanager
async def bounded_waits() -> AsyncIterator[None]:
    """A full pool or a database lock held past the busy timeout is the server at capacity: 503, never a 500."""
    try:
        yield
    except (PoolTimeout, OperationalError) as exc:
        refusal = busy_database(exc)
        if refusal is None:
            raise
        raise refusal from exc


def busy_database(exc: BaseException) -> Overloaded | None:
    """The 503 for a wait on the database that ran out (a full pool, SQLite's lock held past the busy timeout); None
    for any other failure. ``bounded_waits`` applies it; the error handlers too, for a wait that escaped one."""
    if isinstance(exc, PoolTimeout):
        return Overloaded("the database has no free connection; retry after 1 s", headers={"Retry-After": "1"})
    if isinstance(exc, OperationalError) and "database is locked" in str(exc.orig):
        return Overloaded("the database is busy; retry after 1 s", headers={"Retry-After": "1"})
    return None


# SQLite's busy timeout when the caller gives none (the CLI, scripts): as patient as the driver's default.
BUSY_TIMEOUT_SECONDS = 30.0


def create_engine(url: str, connections: int = 32, busy_timeout: float = BUSY_TIMEOUT_SECONDS) -> AsyncEngine:
    """One engine per process, with a pool for ``connections`` requests at once (admission's largest limit) plus
    the background work. SQLite gets WAL and a busy timeout so concurrent requests wait for the write lock (at most
    ``busy_timeout`` seconds, then 503 through ``bounded_waits``) instead of failing at once."""
    pool = {"pool_size": 8, "max_overflow": max(0, connections), "pool_timeout": POOL_TIMEOUT_SECONDS}
    if url.startswith("sqlite"):
        if url.endswith(":memory:"):
            pool = {}
        engine = create_async_engine(url, connect_args={"timeout": busy_timeout}, **pool)

        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, pool_pre_ping=True, **pool)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # FULL: a commit is on disk before the request is acknowledged (crash safety, not just process safety).
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


_SQLITE_FILE = "sqlite+aiosqlite:///"


def _sqlite_file(url: str) -> str | None:
    """The file of an embedded database's URL (aiosqlite on a file); None for any other (in-memory, a server)."""
    if not url.startswith(_SQLITE_FILE) or url.endswith(":memory:"):
        return None
    return url[len(_SQLITE_FILE) :]


def _threaded_sqlite_writer(url: str, busy_timeout: float) -> Engine | None:
    """A synchronous engine on the same SQLite file, for short transactions run whole on a worker thread (see
    Database.transact)."""
    if _sqlite_file(url) is None:
        return None
    writer = create_sync_engine(url.replace("sqlite+aiosqlite", "sqlite", 1), connect_args={"timeout": busy_timeout})
    event.listen(writer, "connect", _sqlite_pragmas)
    return writer


def _inline_sqlite_reader(url: str) -> Engine | None:
    """A synchronous engine on the same SQLite file, for point reads on the hot path (see Database.first)."""
    if _sqlite_file(url) is None:
        return None
    reader = create_sync_engine(url.replace("sqlite+aiosqlite", "sqlite", 1), connect_args={"timeout": 1})

    @event.listens_for(reader, "connect")
    def _read_only(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA query_only=ON")
        cursor.close()

    return reader


def _hot_reader(url: str) -> AsyncEngine | None:
    """A small pool for the per-request point reads on a server database, without ``pool_pre_ping``.

    The ping is a second round trip on every checkout (0.5-1 ms here); ``Database.first`` instead retries once
    when a pooled connection turns out to be dead, which after a database restart costs one retry, not an error.
    """
    if url.startswith("sqlite"):
        return None
    return create_async_engine(url, pool_size=4, max_overflow=8, pool_pre_ping=False, pool_timeout=POOL_TIMEOUT_SECONDS)


class CommitCounter:
    """How many commits the database has seen, where it can say so for almost nothing.

    SQLite counts them per file (``PRAGMA data_version`` changes whenever another connection commits), read here on
    a connection kept for it, inline: two microseconds, against a query through the pool that took about a
    millisecond of the event loop. An idle server's pollers (the index follower four times a second, the revocation
    poll twice, the sync links once) look here first and skip their queries while nothing was committed: an idle
    server's CPU fell to a third (README, ``ENGRAM_REVOCATION_POLL_SECONDS``). PostgreSQL keeps no such counter:
    ``count`` is None there, and the pollers query as before.
    """

    def __init__(self, url: str) -> None:
        self._path = _sqlite_file(url)
        self._conn: sqlite3.Connection | None = None

    def count(self) -> int | None:
        """The counter now; None when unknown (then a poller must look)."""
        if self._path is None:
            return None
        try:
            if self._conn is None:
                # Never writes: its own commits would not move its counter. Never waits either (it runs on the event
                # loop): a database busy recovering or resetting its log is a None, and the poller looks as before.
                self._conn = sqlite3.connect(self._path, timeout=0, isolation_level=None, check_same_thread=False)
                self._conn.execute("PRAGMA query_only=ON")
            row = self._conn.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            log.debug("could not read the database's commit counter", exc_info=True)
            self.close()
            return None
        return int(row[0])

    def watch(self) -> CommitWatch:
        return CommitWatch(self)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class CommitWatch:
    """One poller's view of ``CommitCounter``: ``moved()`` says whether it must look again, ``seen()`` records that
    it has (only after a look that succeeded, so a failed one is tried again at the next turn)."""

    def __init__(self, counter: CommitCounter) -> None:
        self._counter = counter
        self._now: int | None = None
        self._seen: int | None = None

    def moved(self) -> bool:
        self._now = self._counter.count()
        return self._now is None or self._now != self._seen

    def seen(self) -> None:
        self._seen = self._now


class Database:
    """Owns the engine and hands out sessions; created once in the lifespan."""

    def __init__(
        self,
        url: str,
        *,
        connections: int = 32,
        busy_timeout: float = BUSY_TIMEOUT_SECONDS,
        probe: StageProbe | None = None,
    ) -> None:
        self.url = url
        self.engine = create_engine(url, connections, busy_timeout)
        # Called with a session's ``info`` after it commits: what must follow a commit, never precede it (telling
        # open streams a credential was revoked). Failures are logged, never raised: the commit stands.
        self.after_commit: list[Callable[[dict[str, Any]], Awaitable[None]]] = []
        self.sessionmaker = async_sessionmaker(self.engine, expire_on_commit=False)
        self._inline_reader = _inline_sqlite_reader(url)
        self._hot_reader = _hot_reader(url)
        self._threaded_writer = _threaded_sqlite_writer(url, busy_timeout)
        self.commits = CommitCounter(url)
        self._group = (
            GroupCommit(sessionmaker(self._threaded_writer, expire_on_commit=False), self._after_commit, probe=probe)
            if self._threaded_writer is not None
            else None
        )

    async def write(self, work: Work[T]) -> T:
        """Run ``work(session)``, synchronous statements on a session, as one write: on an embedded database in the
        next group commit (see ``app.group_commit``), a savepoint of its own, on a worker thread; elsewhere in a
        transaction of its own. Either way it is committed when this returns."""
        if self._group is None:
            async with self.session() as session:
                return await session.run_sync(work)
        async with refusing_bad_values(), bounded_waits():
            return await self._group.write(work)

    async def write_statement(self, statement: Executable) -> None:
        """One Core write statement, committed when this returns: on SQLite in the next group commit (its turn, not a
        wait for the lock), elsewhere in a transaction of its own on a pooled connection; 503 when the wait runs out."""
        if self._group is not None:
            await self.write(lambda session: session.execute(statement))
            return
        async with refusing_bad_values(), bounded_waits(), self.engine.begin() as conn:
            await conn.execute(statement)

    async def _after_commit(self, info: dict[str, Any]) -> None:
        for hook in self.after_commit:
            try:
                await hook(info)
            except Exception:
                log.exception("an after-commit hook failed")

    async def first(self, statement: Executable, params: dict[str, Any] | None = None) -> Row[Any] | None:
        """The first row of a small indexed read (every request's credential lookup, a user's plan).

        On SQLite it runs inline on the event loop: a WAL read of one indexed row takes tens of microseconds, less
        than the thread hop aiosqlite makes for every statement. On a server database it uses the hot-read pool.
        """
        if self._inline_reader is not None:
            with self._inline_reader.connect() as conn:
                return conn.execute(statement, params or {}).first()
        engine = self._hot_reader or self.engine
        try:
            return await self._first_on(engine, statement, params)
        except DBAPIError as exc:
            if (refused := bad_value(exc)) is not None:
                raise refused from exc
            if not exc.connection_invalidated:
                raise
            # The connection had died (a database restart, an idle timeout); the pool has dropped it. Once more.
            return await self._first_on(engine, statement, params)

    @staticmethod
    async def _first_on(engine: AsyncEngine, statement: Executable, params: dict[str, Any] | None) -> Row[Any] | None:
        async with bounded_waits(), engine.connect() as conn:
            return (await conn.execute(statement, params or {})).first()

    async def transact(self, work: Callable[[Connection], T]) -> T:
        """Run ``work``, synchronous Core statements on one connection, as one transaction (committed when it
        returns, rolled back when it raises).

        For the short, hot writes (a task claim). On SQLite the whole transaction is one trip to a worker thread,
        where through aiosqlite every statement, the commit and the pool's reset are each a trip of their own (six
        for a claim, most of its time); elsewhere it runs on the async engine's connection.
        """
        async with refusing_bad_values(), bounded_waits():
            if self._threaded_writer is not None:
                return await asyncio.to_thread(self._transact_on_thread, self._threaded_writer, work)
            async with self.engine.begin() as conn:
                return await conn.run_sync(work)

    @staticmethod
    def _transact_on_thread(engine: Engine, work: Callable[[Connection], T]) -> T:
        with engine.begin() as conn:
            return work(conn)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A unit of work: commits when the block succeeds, rolls back when it raises."""
        session = self.sessionmaker()
        try:
            async with refusing_bad_values(), bounded_waits():
                try:
                    yield session
                    await session.commit()
                except StaleDataError as exc:
                    # A versioned row (a memory) changed between this transaction's read and its write.
                    await _to_the_end(session.rollback())
                    raise stale_write() from exc
                except BaseException:
                    await _to_the_end(session.rollback())
                    raise
                await self._after_commit(session.info)
        finally:
            await _to_the_end(session.close())

    async def ping(self) -> None:
        from sqlalchemy import text

        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self._hot_reader is not None:
            await self._hot_reader.dispose()
        if self._inline_reader is not None:
            self._inline_reader.dispose()
        if self._threaded_writer is not None:
            self._threaded_writer.dispose()
        self.commits.close()
