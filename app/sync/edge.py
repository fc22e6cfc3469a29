"""The edge side of the protocol: taking a node's pushed batch and serving its pulls, for the token's user only."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import anyio

from app.accounts.principal import Principal
from app.db import Database
from app.errors import Unauthorized, ValidationFailed
from app.memories.engine import MemoryEngine
from app.sync.apply import Applier
from app.sync.changelog import ChangeFeed
from app.sync.metrics import SyncMetrics
from app.sync.outbox import pull_page
from app.sync.peers import PeerBook
from app.sync.protocol import Cursor, PullBody, PushIn, PushOut, incoming
from app.sync.recent import RecentChanges

MAX_PULL_LIMIT = 1000
MAX_WAIT_SECONDS = 60.0
# A long-poll also looks at the log this often, for changes committed by other instances of the edge.
RECHECK_SECONDS = 1.0


class EdgeSync:
    """What ``/sync/v1`` does; the routes authenticate and call this."""

    def __init__(
        self,
        db: Database,
        engine: MemoryEngine,
        applier: Applier,
        feed: ChangeFeed,
        peers: PeerBook,
        dims: int,
        metrics: SyncMetrics | None = None,
        recent: RecentChanges | None = None,
    ) -> None:
        self.metrics = metrics
        self.recent = recent
        self.db = db
        self.engine = engine
        self.applier = applier
        self.feed = feed
        self.peers = peers
        self.dims = dims
        # The server is stopping: long polls answer at once (app.sync.stopping).
        self.stopping = False

    async def push(self, principal: Principal, body: PushIn) -> PushOut:
        """Apply a node's batch to the token's user, in one transaction; a repeated batch changes nothing."""
        batch = [incoming(change, self.engine.model_id, self.dims) for change in body.changes]
        applied = await self.applier.apply(principal.user_id, batch, pushed=True)
        if self.recent is not None:
            self.recent.remember(principal.user_id, self.engine.model_id, body.changes, batch, applied.changed)
        await self.peers.seen(principal.user_id, body.node_id, family_id=principal.key_id or "", name=body.name)
        if self.metrics is not None:
            for outcome, count in (
                ("applied", applied.applied),
                ("unchanged", applied.unchanged),
                ("conflict", applied.conflicts),
                ("discarded", applied.discarded),
            ):
                self.metrics.received.labels(outcome).inc(count)
        return PushOut(
            accepted=len(batch),
            applied=applied.applied,
            unchanged=applied.unchanged,
            conflicts=applied.conflicts,
            discarded=applied.discarded,
        )

    def stop(self) -> None:
        """Answer every long poll now, and later ones without waiting (the server is stopping)."""
        self.stopping = True
        self.feed.notify()  # wakes the long polls' waits

    async def pull(
        self,
        principal: Principal,
        *,
        cursor: str | None,
        limit: int,
        wait: float,
        node: str | None,
        name: str | None = None,
        still_allowed: Callable[[], Awaitable[bool]] | None = None,
        announced: asyncio.Event | None = None,
    ) -> PullBody:
        """The token's user's changes from other origins after ``cursor``; waits up to ``wait`` s for one.

        A pull that waited asks ``still_allowed()`` before it answers, and at once when ``announced`` (a revocation
        of this user) fires while it waits: a token revoked meanwhile gets Unauthorized, never what was written after.
        """
        if not 1 <= limit <= MAX_PULL_LIMIT:
            raise ValidationFailed(f"limit must be between 1 and {MAX_PULL_LIMIT}", field="limit")
        if not 0 <= wait <= MAX_WAIT_SECONDS:
            raise ValidationFailed(f"wait must be between 0 and {MAX_WAIT_SECONDS:.0f} seconds", field="wait")
        position = Cursor.decode(cursor)
        deadline = time.monotonic() + wait
        waited = False
        while True:
            version = self.feed.version
            page = await pull_page(self.db, self.engine, principal.user_id, position, node, limit, self.recent)
            remaining = deadline - time.monotonic()
            if page.changes or page.more or remaining <= 0 or self.stopping:
                break
            position = page.cursor
            waited = True
            if await self._wait(version, min(remaining, RECHECK_SECONDS), announced):
                await self._check(still_allowed)
        if waited:
            await self._check(still_allowed)
        if node:
            family = principal.key_id or ""
            await self.peers.note(principal.user_id, node, family_id=family, name=name, reached=page.reached)
        return {"changes": page.changes, "cursor": page.cursor.encode(), "more": page.more}

    async def _wait(self, version: int, seconds: float, announced: asyncio.Event | None) -> bool:
        """Until the feed moves past ``version``, ``seconds`` pass, or ``announced`` fires; whether it fired."""
        if announced is None:
            await self.feed.wait_past(version, seconds)
            return False

        async def first(wait: Callable[[], Awaitable[object]], scope: anyio.CancelScope) -> None:
            await wait()
            scope.cancel()

        async with anyio.create_task_group() as race:
            race.start_soon(first, lambda: self.feed.wait_past(version, seconds), race.cancel_scope)
            race.start_soon(first, announced.wait, race.cancel_scope)
        fired = announced.is_set()
        announced.clear()
        return fired

    @staticmethod
    async def _check(still_allowed: Callable[[], Awaitable[bool]] | None) -> None:
        if still_allowed is not None and not await still_allowed():
            raise Unauthorized("the access token was revoked while this pull waited")
