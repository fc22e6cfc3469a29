"""The node's sync worker: for every link, a pusher woken by each local commit and a long-polling puller.

``engram serve`` runs it; links made or removed by ``engram sync link|unlink`` are picked up within
``sync_links_poll_seconds``. ``engram sync once`` runs the same steps, once, to the end.

A push sends the next batch and moves the link's position only after the edge took it, so a batch whose answer
was lost is sent again (and applied once). A pull applies a page and moves the cursor in the same transaction.
Whatever fails, nothing is lost: an unreachable edge is retried (at most ``sync_retry_max_seconds`` apart), a
refusal is shown in the link's state and retried later, a revoked grant stops the link until it is linked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from app.db import Database, utcnow
from app.errors import AppError, Conflict
from app.memories.engine import MemoryEngine
from app.settings import Settings
from app.sync import links, timeouts
from app.sync.apply import Applier
from app.sync.backlog import PushPosition, oldest_pending_at, pending
from app.sync.changelog import ChangeFeed
from app.sync.client import CursorReset, EdgeSession, PushRefused
from app.sync.credentials import AccountGone, CredentialsRefused, EdgeUnreachable, SyncAuthError, discover
from app.sync.metrics import SyncMetrics
from app.sync.models import SyncLink
from app.sync.outbox import PushBatch, next_push
from app.sync.protocol import incoming

log = logging.getLogger(__name__)

# A refused push (over quota, say) is tried again this often, and at once when something is written here.
REFUSED_RETRY_SECONDS = 30.0
# With nothing to push, the pusher still looks at the log this often (for writes by other processes).
IDLE_RECHECK_SECONDS = 5.0
# The gauges of /metrics are brought up to date at most this often.
MEASURE_EVERY_SECONDS = 2.0


@dataclass
class SyncContext:
    """What a link's runner needs from its process."""

    settings: Settings
    db: Database
    engine: MemoryEngine | None
    applier: Applier
    feed: ChangeFeed
    node_id: str
    dims: int
    metrics: SyncMetrics | None = None

    @property
    def name(self) -> str:
        return self.settings.sync_node_name or socket.gethostname() or self.node_id

    @property
    def model_id(self) -> str:
        return self.engine.model_id if self.engine is not None else ""


class Stopped(Exception):
    """The link cannot go on (its grant was revoked, or it was removed) until it is linked again."""


class LinkRunner:
    """Pushes and pulls one link. ``step_push`` and ``step_pull`` are one round each (``sync once`` calls them)."""

    def __init__(self, context: SyncContext, link: SyncLink, http: httpx.AsyncClient) -> None:
        self.context = context
        self.link_id = link.id
        self.local_user = link.local_user_id
        self.edge_url = link.edge_url
        self.http = http
        self._link = link
        self._session: EdgeSession | None = None
        self._last_pulled = time.monotonic()
        self._push_position: PushPosition | None = None
        self._states: dict[str, tuple[str, str | None]] = {}
        self._measured = 0.0
        # The next push batch, read while the edge applied the last one: from where it was read.
        self._ahead: tuple[PushPosition, asyncio.Future[PushBatch]] | None = None

    async def session(self) -> EdgeSession:
        if self._session is None:
            edge = await discover(self.http, self.edge_url)
            stored = await links.by_id(self.context.db, self.link_id)
            if stored is None:
                raise Stopped("the link was removed")
            self._session = EdgeSession(
                self.http,
                self.context.db,
                self.link_id,
                edge,
                links.tokens_of(stored, edge.sync_resource),
                max_push_bytes=self.context.settings.sync_push_max_bytes,
            )
        return self._session

    async def step_push(self) -> bool:
        """Send the next batch; True when nothing was left to send."""
        position = self._push_position or await self._stored_push_position()
        batch = await self.read_push(position)
        if batch.changes:
            session = await self.session()
            if not batch.drained:  # a backlog: read the next batch while the edge applies this one
                ahead = asyncio.ensure_future(self._next_push(batch.position))
                # A read ahead that is dropped may have failed: the read done instead reports its own error.
                ahead.add_done_callback(lambda task: task.cancelled() or task.exception())
                self._ahead = (batch.position, ahead)
            await session.push(self.context.node_id, self.context.name, batch.changes)
            if self.context.metrics is not None:
                self.context.metrics.pushed.labels(self.link_id).inc(len(batch.changes))
        if batch.position != position:
            moved = await links.move_push(
                self.context.db, self.link_id, position, batch.position, pushed=bool(batch.changes)
            )
            # Moved by someone else (``sync once`` beside a server): read where it is now, next time.
            self._push_position = batch.position if moved else None
            if moved and batch.changes:
                self._states["push"] = (links.OK, None)
        elif batch.drained:
            await self._set_state("push", links.OK, None)
        return batch.drained and not batch.changes

    async def read_push(self, position: PushPosition) -> PushBatch:
        """The batch at ``position``: the one read ahead when it was read from there, else read now."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            if ahead[0] == position:
                return await ahead[1]
            ahead[1].cancel()  # read from a position this link did not reach (its push failed): read again
            await asyncio.wait([ahead[1]])
        return await self._next_push(position)

    def _next_push(self, position: PushPosition) -> Awaitable[PushBatch]:
        settings = self.context.settings
        return next_push(
            self.context.db, self.context.engine, self.local_user, self.link_id, position, settings.sync_batch_size
        )

    def discard_ahead(self) -> None:
        """Drop a batch read ahead (the runner stops)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead[1].cancel()

    async def _stored_push_position(self) -> PushPosition:
        stored = await links.by_id(self.context.db, self.link_id)
        if stored is None:
            raise Stopped("the link was removed")
        self._push_position = PushPosition(stored.push_seq, stored.push_after)
        return self._push_position

    async def _set_state(self, direction: str, state: str, error: str | None) -> None:
        """Record the state when it changes (not on every round)."""
        if self._states.get(direction) != (state, error):
            await links.set_state(self.context.db, self.link_id, direction, state, error)
            self._states[direction] = (state, error)

    async def step_pull(self, wait: float) -> bool:
        """Apply the next page (waiting up to ``wait`` s for one); True when the edge has more at once."""
        stored = await links.by_id(self.context.db, self.link_id)
        if stored is None:
            raise Stopped("the link was removed")
        session = await self.session()
        try:
            page = await session.pull(
                cursor=stored.pull_cursor,
                limit=self.context.settings.sync_batch_size,
                wait=wait,
                node_id=self.context.node_id,
                name=self.context.name,
            )
        except CursorReset:
            log.warning("the edge %s is behind link %s's cursor: pulling everything again", self.edge_url, self.link_id)
            async with self.context.db.session() as db_session:
                await links.move_pull(db_session, self.link_id, stored.pull_cursor, "")
            return True
        batch = [incoming(change, self.context.model_id, self.context.dims) for change in page.changes]

        async def move_cursor(db_session: object) -> None:
            await links.move_pull(db_session, self.link_id, stored.pull_cursor, page.cursor)  # type: ignore[arg-type]

        await self.context.applier.apply(self.local_user, batch, source=self.link_id, finish=move_cursor)
        # move_cursor recorded the pull as ok: the next failure is a change of state, though it reads as the last.
        self._states["pull"] = (links.OK, None)
        self._last_pulled = time.monotonic()
        if self.context.metrics is not None:
            self.context.metrics.pulled.labels(self.link_id).inc(len(batch))
        return page.more

    async def measure(self) -> None:
        """Update this link's gauges: what is waiting to be pushed, and for how long (at most every few seconds)."""
        metrics = self.context.metrics
        if metrics is None or time.monotonic() - self._measured < MEASURE_EVERY_SECONDS:
            return
        self._measured = time.monotonic()
        stored = await links.by_id(self.context.db, self.link_id)
        if stored is None:
            return
        async with self.context.db.session() as db_session:
            position = PushPosition(stored.push_seq, stored.push_after)
            waiting = await pending(db_session, self.local_user, self.link_id, position)
            oldest = await oldest_pending_at(db_session, self.local_user, self.link_id, stored.push_seq)
        metrics.pending.labels(self.link_id).set(waiting)
        metrics.push_lag.labels(self.link_id).set((utcnow() - oldest).total_seconds() if oldest and waiting else 0.0)
        metrics.pull_lag.labels(self.link_id).set_function(lambda: time.monotonic() - self._last_pulled)

    # --- the loops `engram serve` runs ------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._loop("push", self._push_round))
                tasks.create_task(self._loop("pull", self._pull_round))
        except* Stopped:
            pass
        finally:
            self.discard_ahead()

    async def _push_round(self) -> float:
        version = self.context.feed.version
        while not await self.step_push():
            pass
        await self.measure()
        await self.context.feed.wait_past(version, IDLE_RECHECK_SECONDS)
        return 0.0

    async def _pull_round(self) -> float:
        while await self.step_pull(0.0):
            pass
        await self.step_pull(self.context.settings.sync_pull_wait_seconds)
        return 0.0

    async def _loop(self, direction: str, round_: Callable[[], Awaitable[float]]) -> None:
        backoff = Backoff(self.context.settings.sync_retry_max_seconds)
        while True:
            try:
                await round_()
                backoff.reset()
                continue
            except EdgeUnreachable as exc:
                await self._failed(direction, links.OFFLINE, str(exc))
                await asyncio.sleep(backoff.next())
            except Conflict:  # a local write raced this batch on the same memory: try again
                await asyncio.sleep(backoff.next())
            except AccountGone as exc:
                await self._failed(direction, links.ACCOUNT_DELETED, exc.message)
                log.warning("link %s to %s: %s", self.link_id, self.edge_url, exc.message)
                raise Stopped(exc.message) from exc
            except CredentialsRefused as exc:
                reason = links.relink_hint(self.edge_url, self.local_user, exc.message)
                await self._failed(direction, links.UNAUTHORIZED, reason)
                log.warning("link %s: %s", self.link_id, reason)
                raise Stopped(reason) from exc
            except (PushRefused, SyncAuthError, AppError) as exc:
                await self._failed(direction, links.REFUSED, exc.message)
                retry = getattr(exc, "retry_after", None) or REFUSED_RETRY_SECONDS
                if direction == "push":
                    version = self.context.feed.version
                    await self.context.feed.wait_past(version, retry)
                else:
                    await asyncio.sleep(retry)

    async def _failed(self, direction: str, state: str, error: str) -> None:
        if self.context.metrics is not None:
            self.context.metrics.failures.labels(self.link_id, direction, state).inc()
        with contextlib.suppress(Exception):
            await self._set_state(direction, state, error)


class Backoff:
    """Retry delays for an unreachable edge: from 50 ms, doubling, never more than ``cap`` seconds apart."""

    def __init__(self, cap: float) -> None:
        self.cap = cap
        self.delay = 0.05

    def next(self) -> float:
        delay, self.delay = self.delay, min(self.delay * 2, self.cap)
        return min(delay, self.cap)

    def reset(self) -> None:
        self.delay = 0.05


class SyncWorker:
    """Runs a ``LinkRunner`` for every link in the database, starting and stopping them as links come and go."""

    def __init__(self, context: SyncContext) -> None:
        self.context = context
        self.runners: dict[str, asyncio.Task[None]] = {}
        # The links as last read, read again only once something was committed (an idle server skips the query).
        self._links: dict[str, SyncLink] = {}
        self._commits = context.db.commits.watch()

    async def run(self) -> None:
        async with timeouts.client(self.context.settings) as http:
            try:
                while True:
                    try:
                        await self._reconcile(http)
                    except Exception:
                        log.exception("reading the sync links failed; retrying")
                    await asyncio.sleep(self.context.settings.sync_links_poll_seconds)
            finally:
                for task in self.runners.values():
                    task.cancel()
                await asyncio.gather(*self.runners.values(), return_exceptions=True)

    async def _reconcile(self, http: httpx.AsyncClient) -> None:
        if self._commits.moved():
            async with self.context.db.session() as session:
                self._links = {link.id: link for link in await links.all_links(session)}
            self._commits.seen()
        current = self._links
        for link_id in list(self.runners):
            if link_id not in current:
                self.runners.pop(link_id).cancel()
                if self.context.metrics is not None:
                    self.context.metrics.forget(link_id)
        for link_id, link in current.items():
            task = self.runners.get(link_id)
            if task is None or (task.done() and not _stopped(task)):
                if task is not None and not task.cancelled() and task.exception() is not None:
                    log.error("the runner of link %s failed; restarting it", link_id, exc_info=task.exception())
                runner = LinkRunner(self.context, link, http)
                self.runners[link_id] = asyncio.create_task(runner.run(), name=f"sync-{link_id}")


def _stopped(task: asyncio.Task[None]) -> bool:
    """A runner that ended by itself (unauthorized) stays ended until its link is replaced."""
    return not task.cancelled() and task.exception() is None
